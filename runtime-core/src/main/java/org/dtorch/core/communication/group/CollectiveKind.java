package org.dtorch.core.communication.group;

/**
 * The kinds of collective a {@link ThreadGroup} runs, for counting (as DTensor's comm-mode counter does).
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum CollectiveKind {
    /** {@code allReduce}; {@code allReduceSum_} counts one per call. */
    ALL_REDUCE,
    /**
     * {@code equalShapeAllGatherIntoTensor}, {@code allGatherIntoTensor}, {@code allGather}, {@code allGatherIntoVec},
     * {@code allGatherStacked}; {@code allGatherCat} counts two (the sizes, then the values).
     */
    ALL_GATHER,
    /** {@code reduceScatterTensor}. */
    REDUCE_SCATTER,
    /** {@code allToAll}. */
    ALL_TO_ALL,
    /** {@code barrier}. */
    BARRIER,
    /** {@code send}, {@code recv}, {@code batchIsendIrecv}: one per call, whatever the batch holds. */
    POINT_TO_POINT
}
