package org.dtorch.core.distributed;

/**
 * What one redistribution step does, and the collective it uses (DTorch's matrix, extended):
 *
 * <pre>
 *  from \ to   S(j)                 R                  P(op)
 *  S(i)        ALL_TO_ALL           ALL_GATHER         SHARD_TO_PARTIAL (local)
 *  R           LOCAL_SLICE          -                  REPLICATE_TO_PARTIAL (local)
 *  P(op)       REDUCE_SCATTER       ALL_REDUCE         (via R)
 * </pre>
 *
 * The two local moves to {@code P(op)} are exact: each element keeps exactly one holder along the mesh
 * dimension, every other holder has the identity of {@code op} (0 for sum), so integer tensors stay
 * exact. {@code P(avg)} has no such identity and cannot be a target of them.
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum StepKind {
    /** {@code S(i) -> S(j)}: one all-to-all. */
    ALL_TO_ALL(true),
    /** {@code S(i) -> R}: one all-gather. */
    ALL_GATHER(true),
    /** {@code P -> S(j)}: one reduce-scatter. */
    REDUCE_SCATTER(true),
    /** {@code P -> R}: one all-reduce. */
    ALL_REDUCE(true),
    /** {@code R -> S(j)}: each device keeps its part; no communication. */
    LOCAL_SLICE(false),
    /** {@code R -> P(op)}: coordinate 0 keeps the value, the others hold the identity; no communication. */
    REPLICATE_TO_PARTIAL(false),
    /** {@code S(i) -> P(op)}: each device places its shard in an identity-filled tensor; no communication. */
    SHARD_TO_PARTIAL(false);

    private final boolean communicates;

    StepKind(boolean communicates) {
        this.communicates = communicates;
    }

    /** True when the step runs a collective. */
    public boolean communicates() {
        return communicates;
    }
}
