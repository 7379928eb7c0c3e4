package org.dtorch.core.communication.group;

/**
 * The kinds of collective a {@link ThreadGroup} runs, for counting (as DTensor's comm-mode counter does).
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum CollectiveKind {
    /** {@code allReduce}. */
    ALL_REDUCE,
    /** {@code equalShapeAllGatherIntoTensor}, {@code allGatherIntoTensor}, {@code allGather}, {@code allGatherIntoVec}. */
    ALL_GATHER,
    /** {@code reduceScatterTensor}. */
    REDUCE_SCATTER,
    /** {@code allToAll}. */
    ALL_TO_ALL,
    /** {@code barrier}. */
    BARRIER
}
