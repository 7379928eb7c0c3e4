package org.dtorch.benchmarks;

import java.util.List;
import java.util.function.DoublePredicate;

/**
 * The goal a row is held to. The verdict is taken on the median of the runs; how many single runs met
 * the goal is given beside it, so a verdict that hangs on one noisy run shows.
 *
 * <p>Thread-safe: immutable.
 *
 * @param text   the goal as the table prints it
 * @param target which per-run figure the goal judges
 * @param test   true when a figure meets the goal; null for a row that is context, not a goal
 */
record Goal(String text, Target target, DoublePredicate test) {

    /** The per-run figure a goal judges. */
    enum Target {
        /** Baseline p50 over measured p50 (a comparison row). */
        RATIO,
        /** The measured operation's p50 in nanoseconds (a comparison row). */
        MEASURED_P50,
        /** The figure itself (a single-figure row). */
        VALUE
    }

    /** At least {@code limit} as baseline p50 over measured p50. */
    static Goal ratioAtLeast(double limit) {
        return new Goal("ratio >= " + limit, Target.RATIO, r -> r >= limit);
    }

    /** A measured p50 of at most {@code nanos}. */
    static Goal p50AtMost(long nanos) {
        return new Goal("p50 <= " + Unit.NANOS.format(nanos), Target.MEASURED_P50, p -> p <= nanos);
    }

    /** A single figure of at most {@code limit}, in {@code unit}. */
    static Goal atMost(double limit, Unit unit) {
        return new Goal("at most " + unit.format(limit), Target.VALUE, v -> v <= limit);
    }

    /** A row given for context, without a goal. */
    static Goal context(String why) {
        return new Goal("(" + why + ")", Target.VALUE, null);
    }

    /** The goal cell: the goal, met or not on the median, and in how many runs. */
    String verdict(List<Double> perRun) {
        if (test == null) {
            return text;
        }
        Spread spread = Spread.of(perRun);
        long met = perRun.stream().mapToDouble(Double::doubleValue).filter(test).count();
        return text + ": **" + (test.test(spread.median()) ? "met" : "not met") + "** (" + met + " of " + perRun.size()
            + (perRun.size() == 1 ? " run)" : " runs)");
    }
}
