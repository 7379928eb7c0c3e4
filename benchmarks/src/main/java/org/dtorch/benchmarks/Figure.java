package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;

/**
 * One figure without a baseline of its own (a CPU share, a bandwidth, a per-call cost), one value per run.
 *
 * <p>Not thread-safe: the harness thread adds the runs.
 */
final class Figure {
    private final String label;
    private final Unit unit;
    private final Goal goal;
    private final List<Double> values = new ArrayList<>();

    Figure(String label, Unit unit, Goal goal) {
        if (goal.target() != Goal.Target.VALUE) {
            throw new IllegalArgumentException(label + ": a single figure's goal judges the figure itself");
        }
        this.label = label;
        this.unit = unit;
        this.goal = goal;
    }

    Figure add(double value) {
        values.add(value);
        return this;
    }

    String label() {
        return label;
    }

    Unit unit() {
        return unit;
    }

    int runs() {
        return values.size();
    }

    Spread spread() {
        return Spread.of(values);
    }

    String verdict() {
        return goal.verdict(values);
    }
}
