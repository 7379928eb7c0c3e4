package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Gloo all-reduce's copy into its result buffer (the algorithm of small,
 * non-contiguous or bool inputs, and of {@code dtorch.gloo.ring=false}): the sliced copy moves every byte whatever
 * the number of threads, and a group forced onto the copy with several copy threads and a two-piece overlap still
 * reduces exactly like torch and leaves its input alone.
 */
@Timeout(180)
class GlooResultCopyTest {
    private static final int WORLD = 4;

    @Test
    void shouldCopyEveryByteWithAnyNumberOfThreads() {
        long bytes = (5L << 20) + 37; // not a multiple of a cache line, nor of the threads
        try (Arena arena = Arena.ofShared()) { // shared: the helpers read and write it
            MemorySegment from = arena.allocate(bytes);
            for (long i = 0; i < bytes; i++) {
                from.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            MemorySegment original = arena.allocate(bytes).copyFrom(from);
            for (int threads : new int[] {1, 2, 3, 7}) {
                MemorySegment to = arena.allocate(bytes);
                HostCopy.copy(from, to, threads, Duration.ofSeconds(30), "test copy");
                assertEquals(-1, to.mismatch(from), threads + " threads: the copy differs from its source");
                assertEquals(-1, from.mismatch(original), threads + " threads: the source changed");
            }
        }
    }

    @Test
    void shouldGiveEachRankOfTheJvmItsShareOfTheProcessors() {
        int processors = SliceTeam.PROCESSORS;
        assertEquals(Math.max(1, processors / 4), HostCopy.share(4));
        assertEquals(1, HostCopy.share(processors + 1), "more ranks than processors: one thread each");
        assertEquals(4, HostCopy.threadsFor(64L << 20, 4, 0));
        assertEquals(1, HostCopy.threadsFor(512 << 10, 4, 0), "under a slice's minimum: one thread");
        assertEquals(3, HostCopy.threadsFor(64L << 20, 1, 3), "a forced count replaces the share");
        assertEquals(2, HostCopy.threadsFor(2L << 20, 1, 8), "a forced count is still bounded by the bytes");
    }

    @Test
    void shouldOverlapOnlyWhereItCanPay() {
        GlooCopyOptions automatic = new GlooCopyOptions(0, GlooCopyOptions.AUTOMATIC);
        assertEquals(16L << 20, automatic.firstPieceBytes(64L << 20, GlooCopyOptions.MIN_SHARE_TO_OVERLAP), "a quarter first");
        assertEquals(0, automatic.firstPieceBytes(64L << 20, 1), "no processor beside Gloo's: no overlap");
        assertEquals(0, automatic.firstPieceBytes(GlooCopyOptions.MIN_OVERLAP_BYTES - 1, 4), "small all-reduces are not cut");
        GlooCopyOptions forced = new GlooCopyOptions(0, 0.3);
        assertEquals(0, forced.firstPieceBytes(GlooCopyOptions.MIN_OVERLAP_BYTES + 1, 1) % 4096, "a forced cut, aligned");
        assertTrue(forced.firstPieceBytes(64L << 20, 1) > 0, "a forced fraction overlaps whatever the share");
        assertEquals(0, new GlooCopyOptions(0, 0).firstPieceBytes(64L << 20, 4), "0 is no overlap");
        assertThrows(IllegalArgumentException.class, () -> new GlooCopyOptions(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> new GlooCopyOptions(0, 1));
    }

    @Test
    void shouldReduceExactlyWithForcedCopyThreadsAndOverlap() {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60))) {
            List<Long> ids = GroupFixtures.ids(WORLD);
            // The groups read their options when they are created, so create them with the properties set: the copy, not
            // the ring, which large contiguous inputs take by default.
            List<ThreadGroup> groups = withProperties("3", "0.3",
                () -> RankThreads.run(WORLD, rank -> manager.getThreadGroup(DeviceKind.CPU, ids, rank)));
            // Over the overlap's minimum in every dtype (bfloat16 too), not a multiple of the piece alignment or of the threads.
            long[] shape = {2063, 1029};
            List<List<String>> failures = RankThreads.run(WORLD, Duration.ofSeconds(150), rank -> reduceEveryOp(groups.get(rank), rank, shape));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    /** Every op on float32, bfloat16 and int64 inputs against torch on the full tensors; the mismatches. */
    private static List<String> reduceEveryOp(ThreadGroup group, int rank, long[] shape) {
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
            List<Tensor> partials = GroupFixtures.perRank(WORLD, r -> TestTensors.pattern(shape, dtype, 5 * r, 3, 1));
            Tensor mine = partials.get(rank);
            List<ReduceOpType> ops = new ArrayList<>(List.of(ReduceOpType.SUM, ReduceOpType.MAX, ReduceOpType.MIN, ReduceOpType.PRODUCT));
            if (dtype != ScalarType.Long) {
                ops.add(ReduceOpType.AVG);
            }
            try (Tensor before = mine.clone()) {
                for (ReduceOpType op : ops) {
                    try (Tensor expected = GroupFixtures.reference(partials, op); Tensor actual = group.allReduce(mine, op)) {
                        check.equal("allReduce(" + op + ") " + TorchTensors.dtypeName(dtype), expected, actual, op == ReduceOpType.AVG);
                    }
                }
                check.equal("allReduce leaves its input alone, " + TorchTensors.dtypeName(dtype), before, mine, false);
            } finally {
                partials.forEach(Tensor::close);
            }
        }
        return check.failures;
    }

    /** Runs {@code body} with the copy algorithm (not the ring) and the given copy options. */
    private static <T> T withProperties(String copyThreads, String firstPiece, java.util.function.Supplier<T> body) {
        String algorithmBefore = System.setProperty(GlooRing.RING_PROPERTY, "false");
        String threadsBefore = System.setProperty(GlooCopyOptions.COPY_THREADS_PROPERTY, copyThreads);
        String pieceBefore = System.setProperty(GlooCopyOptions.FIRST_PIECE_PROPERTY, firstPiece);
        try {
            return body.get();
        } finally {
            restore(GlooRing.RING_PROPERTY, algorithmBefore);
            restore(GlooCopyOptions.COPY_THREADS_PROPERTY, threadsBefore);
            restore(GlooCopyOptions.FIRST_PIECE_PROPERTY, pieceBefore);
        }
    }

    private static void restore(String name, String before) {
        if (before == null) {
            System.clearProperty(name);
        } else {
            System.setProperty(name, before);
        }
    }
}
