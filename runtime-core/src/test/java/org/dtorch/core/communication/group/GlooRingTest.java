package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.OnThread;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The Gloo backend's ring: the all-reduce, which reads the input in place and writes a new result,
 * exact like torch in every op and real type, on worlds of 2 to 4 ranks with chunks and segments that do not divide
 * evenly; the reduce-scatter and all-gathers round the same ring, with uneven and empty chunks; the same bits on every
 * rank; the input left alone; a peer that never comes or an abort ends it by its deadline, naming the step and the
 * peer it waited for. Every build reduces one type of each kind on 3 ranks; the {@code slow} run every real type on 2, 3
 * and 4 ranks.
 */
@Timeout(180)
class GlooRingTest {
    /** 1031 x 1031 elements: over the ring's minimum even in one-byte types, and prime to the ranks and segments. */
    private static final long[] SHAPE = {1031, 1031};
    /** Small segments, so that every chunk is cut into the most segments. */
    private static final String SMALL_SEGMENTS = "65536";

    /** Every op in one type of each kind (32-bit float, 16-bit float, unsigned and signed integer) on 3 ranks. */
    @Test
    void shouldReduceEveryOpExactlyLikeTorchInOneTypeOfEachKind() {
        reduceOnTheRing(3, List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Byte, ScalarType.Long));
    }

    /** Every op in every real type on 2, 3 and 4 ranks. */
    @ParameterizedTest
    @ValueSource(ints = {2, 3, 4})
    @Tag("slow")
    void shouldReduceEveryOpAndRealTypeExactlyLikeTorch(int world) {
        reduceOnTheRing(world, List.of(ScalarType.Float, ScalarType.Double, ScalarType.Half, ScalarType.BFloat16, ScalarType.Byte,
            ScalarType.Char, ScalarType.Short, ScalarType.Int, ScalarType.Long));
    }

    private static void reduceOnTheRing(int world, List<ScalarType> types) {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60))) {
            List<ThreadGroup> groups = withRing(SMALL_SEGMENTS,
                () -> RankThreads.run(world, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank)));
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(150),
                rank -> reduceEveryOp(groups.get(rank), rank, world, types));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    /**
     * Every op of the all-reduce over the ring's minimum in two types, then every collective on 2 MB (the reduce-scatter
     * and all-gathers round the ring): the process and multi-node tests call it, on Gloo, where it takes the ring, and on
     * the same-device backend; the mismatches.
     */
    static List<String> reduceLarge(ThreadGroup group) {
        List<String> failures = new ArrayList<>(reduceEveryOp(group, group.getRank(), group.getWorldSize(),
            List.of(ScalarType.Float, ScalarType.Long)));
        failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Long, new long[] {5, 50021}));
        return failures;
    }

    private static List<String> reduceEveryOp(ThreadGroup group, int rank, int world, List<ScalarType> types) {
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        for (ScalarType dtype : types) {
            // Values 1 to 3: sums and products of up to four ranks are exact in every type here (averages are compared closely).
            List<Tensor> partials = GroupFixtures.perRank(world, r -> TestTensors.pattern(SHAPE, dtype, 5 * r, 3, 1));
            Tensor mine = partials.get(rank);
            boolean floating = mine.is_floating_point();
            List<ReduceOpType> ops = new ArrayList<>(List.of(ReduceOpType.SUM, ReduceOpType.MAX, ReduceOpType.MIN, ReduceOpType.PRODUCT));
            if (floating) {
                ops.add(ReduceOpType.AVG);
            }
            try (Tensor before = mine.clone()) {
                for (ReduceOpType op : ops) {
                    try (Tensor expected = GroupFixtures.reference(partials, op); Tensor actual = group.allReduce(mine, op)) {
                        check.equal("ring allReduce(" + op + ") " + TorchTensors.dtypeName(dtype) + " on " + world + " ranks", expected, actual,
                            op == ReduceOpType.AVG);
                    }
                }
                check.equal("the ring leaves its input alone, " + TorchTensors.dtypeName(dtype), before, mine, false);
            } finally {
                partials.forEach(Tensor::close);
            }
        }
        return check.failures;
    }

    @ParameterizedTest
    @ValueSource(ints = {2, 3, 4})
    void shouldGatherAndScatterRoundTheRingLikeTorch(int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60))) {
            List<ThreadGroup> groups = withRing(SMALL_SEGMENTS,
                () -> RankThreads.run(world, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank)));
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(150), rank -> {
                ThreadGroup group = groups.get(rank);
                List<String> found = new ArrayList<>();
                // Over the ring's minimum in all: uneven rows and columns on 3 and 4 ranks, and chunks of one or two long
                // rows (5 rows on 4 ranks), both along dim 0 and along the last dim.
                found.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Float, new long[] {1031, 263}));
                found.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Long, new long[] {5, 50021}));
                found.addAll(gatherStacked(group, rank, world));
                return found;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    /** {@code allGatherStacked} of 1.2 MB per rank: slice r of the result is rank r's tensor; the mismatches. */
    private static List<String> gatherStacked(ThreadGroup group, int rank, int world) {
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        long[] shape = {300, 1000};
        List<Tensor> locals = GroupFixtures.perRank(world, r -> TestTensors.pattern(shape, ScalarType.Float, 7 * r, 37, 0));
        try (Tensor stacked = group.allGatherStacked(locals.get(rank))) {
            check.that("allGatherStacked shape", stacked.dim() == 3 && stacked.size(0) == world, TorchTensors.describe(stacked));
            for (int r = 0; r < world; r++) {
                try (Tensor slice = stacked.select(0, r)) {
                    check.equal("allGatherStacked slice " + r, locals.get(r), slice, false);
                }
            }
        } finally {
            locals.forEach(Tensor::close);
        }
        return check.failures;
    }

    @Test
    void shouldGiveEveryRankTheSameBitsOfAnInexactSum() {
        int world = 4;
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60))) {
            List<ThreadGroup> groups = withRing(SMALL_SEGMENTS,
                () -> RankThreads.run(world, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank)));
            List<Tensor> inputs = new ArrayList<>();
            torch.manual_seed(485);
            for (int r = 0; r < world; r++) {
                inputs.add(torch.randn(3_000_001));
            }
            try {
                for (ReduceOpType op : List.of(ReduceOpType.SUM, ReduceOpType.AVG)) {
                    List<Tensor> results = RankThreads.run(world, rank -> groups.get(rank).allReduce(inputs.get(rank), op));
                    try (Tensor expected = GroupFixtures.reference(inputs, op)) {
                        for (int r = 0; r < world; r++) {
                            assertTrue(results.get(r).equal(results.getFirst()), op + ": rank " + r + "'s result differs from rank 0's");
                            assertTrue(torch.allclose(expected, results.get(r), 1e-5, 1e-5, false), op + ": rank " + r + " is not the sum");
                        }
                    } finally {
                        results.forEach(Tensor::close);
                    }
                }
            } finally {
                inputs.forEach(Tensor::close);
            }
        }
    }

    @Test
    void shouldTimeOutNamingTheStepAndThePeerWhenAPeerNeverArrives() {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(4))) {
            List<ThreadGroup> groups = withRing(SMALL_SEGMENTS,
                () -> RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank)));
            ThreadGroup lonely = groups.get(0);
            try (Tensor x = TestTensors.full(1f, SHAPE)) {
                long start = System.nanoTime();
                CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> lonely.allReduce(x));
                long millis = (System.nanoTime() - start) / 1_000_000;
                assertTrue(e.getMessage().startsWith("allReduce(sum) on group cpu[0, 1] (rank 0 of 2, gloo): timed out after 4 s waiting for "
                    + "ring step 1 of 2: the receive of chunk 0 from rank 1 (gloo: "), e.getMessage());
                assertTrue(millis < 10_000, "one deadline for the whole ring, not one per wait: " + millis + " ms");
                try (Tensor ones = TestTensors.full(1f, SHAPE)) {
                    assertTrue(x.equal(ones), "the input is left alone after a failure");
                }
                CommException poisoned = assertThrows(CommException.class, () -> lonely.allReduce(x));
                assertTrue(poisoned.getMessage().contains("unusable after an earlier communication failure"), poisoned.getMessage());
            }
        }
    }

    @Test
    void shouldFreeARankWaitingInTheRingWhenItsGroupIsAborted() throws Exception {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60))) {
            List<ThreadGroup> groups = withRing(SMALL_SEGMENTS,
                () -> RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank)));
            OnThread<Throwable> blocked = OnThread.start("ring-rank-0", () -> {
                try (Tensor x = TestTensors.full(1f, SHAPE)) {
                    groups.get(0).allReduce(x).close();
                    return null;
                } catch (Throwable e) {
                    return e;
                }
            });
            Await.asleep(blocked.thread()); // rank 0 waits in the ring for rank 1, which never calls
            assertEquals(1, manager.abort("the test aborts"), "rank 1's instance is released, rank 0's is in its collective");
            // Freed by the abort, not by the 60 s deadline: the message says so, and the wait for it ends well before.
            Throwable failure = blocked.result().get(30, TimeUnit.SECONDS);
            assertInstanceOf(CommException.class, failure);
            assertTrue(failure.getMessage().contains("ring step 1 of 2: the receive of chunk 0 from rank 1"), failure.getMessage());
            assertTrue(failure.getMessage().contains("the group was being aborted: the test aborts"), failure.getMessage());
            assertEquals(FailureKind.COMMUNICATION, FailureKind.of(failure));
        }
    }

    @Test
    void shouldApplyOnlyToLargeContiguousHostTensorsOfRealTypes() {
        GlooRing.Options ring = new GlooRing.Options(true, GlooRing.DEFAULT_SEGMENT_BYTES);
        try (Tensor large = torch.ones(1L << 18); Tensor small = torch.ones((1L << 18) - 1);
             Tensor square = torch.ones(1024, 1024); Tensor strided = square.t(); Tensor bytes = torch.ones(1L << 21);
             Tensor flags = bytes.to(ScalarType.Bool)) {
            assertTrue(ring.applies(large, 2), "1 MiB of float32");
            assertFalse(ring.applies(large, 1), "one rank has nothing to exchange");
            assertFalse(ring.applies(small, 4), "under 1 MiB: copied and reduced by Gloo in one call");
            assertFalse(ring.applies(strided, 4), "not contiguous");
            assertFalse(ring.applies(flags, 4), "bool is not a real number type");
            assertFalse(new GlooRing.Options(false, GlooRing.DEFAULT_SEGMENT_BYTES).applies(large, 4), "the ring turned off");
        }
        assertEquals(4, ring.segments(16L << 20), "16 MiB chunks: four 4 MiB segments");
        assertEquals(1, ring.segments(1L << 20), "at least one segment");
        assertEquals(GlooRing.MAX_SEGMENTS, ring.segments(1L << 30), "at most sixteen");
        assertThrows(IllegalArgumentException.class, () -> new GlooRing.Options(true, 4095));
    }

    @Test
    void shouldRefuseBadPropertiesByName() {
        String algorithm = assertThrows(IllegalArgumentException.class,
            () -> withProperty(GlooRing.RING_PROPERTY, "yes", GlooRing.Options::fromSystemProperties)).getMessage();
        assertTrue(algorithm.contains("dtorch.gloo.ring must be 'true' or 'false', got 'yes'"), algorithm);
        String segments = assertThrows(IllegalArgumentException.class,
            () -> withProperty(GlooRing.SEGMENT_BYTES_PROPERTY, "4M", GlooRing.Options::fromSystemProperties)).getMessage();
        assertTrue(segments.contains("dtorch.gloo.ringSegmentBytes must be a whole number of bytes, got '4M'"), segments);
        assertFalse(withProperty(GlooRing.RING_PROPERTY, "false", GlooRing.Options::fromSystemProperties).enabled());
    }

    /** Creates groups with small ring segments: the backend reads its options when a group is created. */
    private static <T> T withRing(String segmentBytes, Supplier<T> body) {
        return withProperty(GlooRing.SEGMENT_BYTES_PROPERTY, segmentBytes, body);
    }

    private static <T> T withProperty(String name, String value, Supplier<T> body) {
        String before = System.setProperty(name, value);
        try {
            return body.get();
        } finally {
            if (before == null) {
                System.clearProperty(name);
            } else {
                System.setProperty(name, before);
            }
        }
    }
}
