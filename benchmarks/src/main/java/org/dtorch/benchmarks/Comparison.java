package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.function.ToDoubleFunction;

/**
 * One table row over several runs: a measured operation and its baseline, timed in the same run. The
 * ratio is taken per run (baseline p50 over measured p50: above 1 when the measured operation is the
 * faster), then summarized like every other figure, by median and range.
 *
 * <p>Not thread-safe: the harness thread adds the runs.
 */
final class Comparison {
    private final String label;
    private final Goal goal;
    /** The docs area this row belongs to when not its section's; null for the section's. */
    private String area;
    private final List<Samples> measured = new ArrayList<>();
    private final List<Samples> baseline = new ArrayList<>();

    Comparison(String label, Goal goal) {
        if (goal.target() == Goal.Target.VALUE && goal.test() != null) {
            throw new IllegalArgumentException(label + ": a comparison row's goal judges the ratio or the p50, not a single figure");
        }
        this.label = label;
        this.goal = goal;
    }

    /** One run's samples of the measured operation and of its baseline. */
    Comparison add(Samples measuredRun, Samples baselineRun) {
        if (!measured.isEmpty() && !baseline.getLast().name().equals(baselineRun.name())) {
            throw new IllegalArgumentException(label + ": baseline changed between runs, from " + baseline.getLast().name()
                + " to " + baselineRun.name());
        }
        measured.add(measuredRun);
        baseline.add(baselineRun);
        return this;
    }

    String label() {
        return label;
    }

    /**
     * Files this row under {@code area} of docs/benchmarks.md ({@link DocsTable}) instead of its section's area, for a
     * harness whose rows belong to several ({@code speed}).
     */
    Comparison inArea(String area) {
        this.area = area;
        return this;
    }

    /** The docs area this row names for itself, or null for its section's. */
    String area() {
        return area;
    }

    Goal goal() {
        return goal;
    }

    int runs() {
        return measured.size();
    }

    /** The baseline's name, as the samples of the first run call it. */
    String baselineName() {
        requireRuns();
        return baseline.getFirst().name();
    }

    List<Double> measuredP50s() {
        return each(measured, Samples::p50);
    }

    List<Double> ratios() {
        requireRuns();
        List<Double> ratios = new ArrayList<>();
        for (int run = 0; run < measured.size(); run++) {
            ratios.add((double) baseline.get(run).p50() / Math.max(1, measured.get(run).p50()));
        }
        return ratios;
    }

    Spread measuredP50() {
        return Spread.of(measuredP50s());
    }

    Spread measuredP99() {
        return Spread.of(each(measured, Samples::p99));
    }

    Spread baselineP50() {
        return Spread.of(each(baseline, Samples::p50));
    }

    Spread baselineP99() {
        return Spread.of(each(baseline, Samples::p99));
    }

    Spread ratio() {
        return Spread.of(ratios());
    }

    /** The goal cell, judged on the figure the goal targets. */
    String verdict() {
        return goal.verdict(goal.target() == Goal.Target.MEASURED_P50 ? measuredP50s() : ratios());
    }

    private List<Double> each(List<Samples> runs, ToDoubleFunction<Samples> figure) {
        requireRuns();
        return runs.stream().map(s -> figure.applyAsDouble(s)).toList();
    }

    private void requireRuns() {
        if (measured.isEmpty()) {
            throw new IllegalStateException(label + ": no runs recorded");
        }
    }
}
