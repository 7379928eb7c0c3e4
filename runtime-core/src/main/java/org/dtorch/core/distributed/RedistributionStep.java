package org.dtorch.core.distributed;

import java.util.Objects;

/**
 * One step of a plan: mesh dimension {@code meshDim} changes from {@code from} to {@code to} with
 * {@code kind}; every other mesh dimension keeps its placement. {@code after} is the layout once the
 * step has run (the executor reads gathered sizes from it).
 *
 * <p>Thread-safe: immutable.
 *
 * @param meshDim the mesh dimension that changes
 * @param from    its placement before
 * @param to      its placement after
 * @param kind    what the step does
 * @param after   the layout after the step
 */
public record RedistributionStep(int meshDim, Placement from, Placement to, StepKind kind, ShardLayout after) {

    /** Validates the components. */
    public RedistributionStep {
        Objects.requireNonNull(from, "from");
        Objects.requireNonNull(to, "to");
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(after, "after");
    }

    /** Prints as {@code mesh dim 0: S(0) -> R (ALL_GATHER)}. */
    @Override
    public String toString() {
        return "mesh dim " + meshDim + ": " + from + " -> " + to + " (" + kind + ")";
    }
}
