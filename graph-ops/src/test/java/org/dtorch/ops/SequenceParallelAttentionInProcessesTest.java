package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One case of {@link SequenceParallelAttentionTest} per strategy with every device a worker process: the ring's spec
 * (scale, grouped heads) and its mask cross to the workers by the codec, the blocks' offsets are computed there.
 */
@Tag("multiprocess")
@Timeout(300)
class SequenceParallelAttentionInProcessesTest {
    private static DTorch processes;

    @BeforeAll
    static void start() {
        processes = SharedWorkerProcesses.runtime();
    }

    @Test
    void shouldRingAnUnevenMaskedGroupedSequenceInProcesses() {
        SequenceParallelAttentionTest.assertLikeTorch(processes, new SequenceParallelAttentionTest.Case(SequenceParallelAttentionTest.Strategy.RING,
            new int[] {4}, 13, 13, 8, 2, SequenceParallelAttentionTest.Masking.FLOAT_PER_HEAD));
    }

    @Test
    void shouldRunUlyssesOnAnEmptyShardInProcesses() {
        SequenceParallelAttentionTest.assertLikeTorch(processes, new SequenceParallelAttentionTest.Case(SequenceParallelAttentionTest.Strategy.ULYSSES,
            new int[] {4}, 3, 3, 4, 4, SequenceParallelAttentionTest.Masking.BOOL));
    }

    @Test
    void shouldRunUspCausallyInProcesses() {
        SequenceParallelAttentionTest.assertLikeTorch(processes, new SequenceParallelAttentionTest.Case(SequenceParallelAttentionTest.Strategy.USP,
            new int[] {2, 2}, 7, 7, 8, 2, SequenceParallelAttentionTest.Masking.CAUSAL));
    }
}
