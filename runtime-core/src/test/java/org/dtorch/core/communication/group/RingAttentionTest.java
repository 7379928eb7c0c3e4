package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Ring attention and its K/V rotation on real rank threads over Gloo and the same-device backend: each rank's output
 * equals its rows of torch's {@code scaled_dot_product_attention} on the whole sequence (float32, within
 * {@code rtol = 1e-4, atol = 1e-5}), causal or not; every rotated block is exactly the block its rank made, in ring
 * order, in two reused buffers; bad input is refused before anything moves.
 */
@Timeout(60)
class RingAttentionTest {
    private static final double RTOL = 1e-4;
    private static final double ATOL = 1e-5;

    /** Smooth values in [-2, 2], distinct per tensor: {@code 2 sin(pattern)}. */
    private static Tensor values(long[] shape, long shift, long modulus) {
        try (Tensor p = TestTensors.pattern(shape, ScalarType.Float, shift, modulus, 0); Tensor s = p.sin(); Scalar two = new Scalar(2.0)) {
            return s.mul(two);
        }
    }

    @ParameterizedTest(name = "{0} world={1} causal={2}")
    @CsvSource({"GLOO, 2, false", "GLOO, 2, true", "GLOO, 4, false", "GLOO, 4, true",
        "SAME_DEVICE, 2, false", "SAME_DEVICE, 2, true", "SAME_DEVICE, 4, false", "SAME_DEVICE, 4, true", "GLOO, 1, true"})
    void shouldEqualFullAttention(Backend backend, int world, boolean causal) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(60),
                rank -> equalsFullAttention(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), causal, Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            // One batch per rotation step and rank, two calls.
            assertEquals(2L * world * (world - 1), manager.collectiveCounter().count(CollectiveKind.POINT_TO_POINT));
        }
    }

    /**
     * One rank's ring attention on {@code device}, called twice on one {@link RingAttention} (the second call reuses the
     * receive buffers), against its rows of torch's attention of the whole sequence on the CPU; the failures found.
     * Non-causal: a key block shorter than the query block and values wider than the keys.
     */
    static List<String> equalsFullAttention(ThreadGroup group, boolean causal, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        long seq = 3;
        long keySeq = causal ? seq : 2;
        long[] qShape = {2, 2, seq * world, 4};
        long[] kShape = {2, 2, keySeq * world, 4};
        long[] vShape = {2, 2, keySeq * world, causal ? 4 : 5};
        List<String> failed = new ArrayList<>();
        try (RingAttention attention = new RingAttention(group);
             Tensor q = values(qShape, 0, 97); Tensor k = values(kShape, 5, 89); Tensor v = values(vShape, 11, 83);
             Tensor full = torch.scaled_dot_product_attention(q, k, v, new TensorOptional(), 0.0, causal, new DoubleOptional(), false);
             Tensor expected = ThreadGroupCollectivesTest.shardOf(full, 2, world, rank);
             Tensor localQ = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(q, 2, world, rank), device);
             Tensor localK = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(k, 2, world, rank), device);
             Tensor localV = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(v, 2, world, rank), device)) {
            for (int call = 0; call < 2; call++) {
                try (Tensor onDevice = attention.forward(localQ, localK, localV, causal); Tensor out = TorchTensors.to(onDevice, Device.cpu(0));
                     Tensor diff = out.sub(expected); Tensor abs = diff.abs(); Tensor max = abs.max()) {
                    if (!java.util.Arrays.equals(expected.sizes().vec().get(), out.sizes().vec().get())
                        || !out.allclose(expected, RTOL, ATOL, false)) {
                        failed.add("rank " + rank + " call " + call + ": max |diff| " + max.item_double() + "\n"
                            + TestTensors.diff(expected, out));
                    }
                }
            }
        }
        return failed;
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRunInEveryRingGroupOfAParallelConfigAtOnce(Backend backend) {
        ParallelConfig config = new ParallelConfig(1, 1, 2, 2, 1, 1);
        long[] shape = {1, 2, 4, 4};
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(config.worldSize(), Duration.ofSeconds(60), rank -> {
                List<Long> ring = config.ringGroup(rank);
                int ringRank = ring.indexOf((long) rank);
                List<String> failed = new ArrayList<>();
                // Each ring group (one per Ulysses position) attends a sequence of its own.
                long shift = 7 * ring.getFirst();
                try (RingAttention attention = new RingAttention(manager.getThreadGroup(DeviceKind.CPU, ring, rank));
                     Tensor q = values(shape, shift, 97); Tensor k = values(shape, shift + 5, 89); Tensor v = values(shape, shift + 11, 83);
                     Tensor full = torch.scaled_dot_product_attention(q, k, v, new TensorOptional(), 0.0, true, new DoubleOptional(), false);
                     Tensor expected = ThreadGroupCollectivesTest.shardOf(full, 2, ring.size(), ringRank);
                     Tensor localQ = ThreadGroupCollectivesTest.shardOf(q, 2, ring.size(), ringRank);
                     Tensor localK = ThreadGroupCollectivesTest.shardOf(k, 2, ring.size(), ringRank);
                     Tensor localV = ThreadGroupCollectivesTest.shardOf(v, 2, ring.size(), ringRank);
                     Tensor out = attention.forward(localQ, localK, localV, true)) {
                    if (!out.allclose(expected, RTOL, ATOL, false)) {
                        failed.add("rank " + rank + " in " + ring + ": " + TestTensors.diff(expected, out));
                    }
                }
                return failed;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    @ParameterizedTest(name = "{0} world={1}")
    @CsvSource({"GLOO, 4", "SAME_DEVICE, 4", "SAME_DEVICE, 2"})
    void shouldRotateEveryBlockInRingOrderThroughTwoBuffers(Backend backend, int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(60), rank -> {
                List<String> failed = new ArrayList<>();
                try (RingP2PComm ring = new RingP2PComm(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank))) {
                    java.util.Set<Long> addresses = new java.util.HashSet<>();
                    for (int call = 0; call < 2; call++) {
                        try (Tensor k = TestTensors.pattern(new long[] {2, 3}, ScalarType.Float, rank, 50, 10L * rank + call);
                             Tensor v = TestTensors.pattern(new long[] {2, 1}, ScalarType.Float, rank, 50, -10L * rank - call)) {
                            RingP2PComm.KvBlock block = ring.begin(k, v);
                            for (int step = 0; step < world; step++) {
                                long source = (rank - step + world) % world;
                                try (Tensor ek = TestTensors.pattern(new long[] {2, 3}, ScalarType.Float, source, 50, 10L * source + call);
                                     Tensor ev = TestTensors.pattern(new long[] {2, 1}, ScalarType.Float, source, 50, -10L * source - call)) {
                                    if (!TestTensors.same(ek, block.k()) || !TestTensors.same(ev, block.v())) {
                                        failed.add("rank " + rank + " call " + call + " step " + step + ": k " + TestTensors.diff(ek, block.k())
                                            + ", v " + TestTensors.diff(ev, block.v()));
                                    }
                                }
                                addresses.add(block.k().data_ptr().address());
                                if (step + 1 < world) {
                                    ring.submitNext();
                                }
                                block.close();
                                if (step + 1 < world) {
                                    block = ring.awaitNext();
                                }
                            }
                        }
                    }
                    if (addresses.size() != 2) {
                        failed.add("rank " + rank + ": blocks in " + addresses.size() + " buffers, not 2");
                    }
                }
                return failed;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRefuseBadInputBeforeCommunicating(Backend backend) {
        int world = 2;
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            RankThreads.runAll(world, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank);
                try (RingAttention attention = new RingAttention(group); RingP2PComm ring = new RingP2PComm(group);
                     Tensor q = TestTensors.full(1f, 1, 3, 4); Tensor shortK = TestTensors.full(1f, 1, 2, 4);
                     Tensor wideK = TestTensors.full(1f, 1, 3, 5); Tensor v = TestTensors.full(1f, 1, 3, 4);
                     Tensor otherV = TestTensors.full(1f, 1, 2, 4); Tensor ints = q.to(ScalarType.Long)) {
                    String where = "RingAttention.forward (rank " + rank + " of 2): ";
                    RingAttention.Blocks wrongLength = new RingAttention.Blocks(0, new long[] {0, 3}, new long[] {3, 3});
                    assertTrue(GroupFixtures.rejected(() -> attention.forward(q, shortK, otherV, null, wrongLength, RingAttention.Options.of(false)))
                        .startsWith(where + "blocks Blocks[queryOffset=0, keyOffsets=[0, 3], keyLengths=[3, 3]] must give one key block per rank"
                            + " of 2 and this rank's length 2"));
                    RingAttention.Blocks even = RingAttention.Blocks.even(rank, 2, 3, 3);
                    assertTrue(GroupFixtures.rejected(() -> attention.forward(q, q, v, ints, even, RingAttention.Options.of(false)))
                        .contains("attn_mask must be boolean, float or the query's dtype"));
                    assertTrue(GroupFixtures.rejected(() -> attention.forward(q, q, v, wideK, even, RingAttention.Options.of(false)))
                        .contains("does not broadcast to this rank's scores [1, 3, 6]"));
                    assertTrue(GroupFixtures.rejected(() -> attention.forward(q, wideK, v, false)).contains("head dimension"));
                    assertTrue(GroupFixtures.rejected(() -> attention.forward(ints, ints, ints, false)).contains("must be floating"));
                    assertEquals("RingP2PComm.begin (rank " + rank + " of 2): k and v need one dtype and device and equal sizes but for the"
                        + " last, got k float32[1, 3, 4] on cpu, v float32[1, 2, 4] on cpu",
                        GroupFixtures.rejected(() -> attention.forward(q, q, otherV, false)));
                    assertTrue(assertThrows(IllegalStateException.class, ring::submitNext).getMessage().contains("no rotation begun"));
                    assertTrue(assertThrows(IllegalStateException.class, ring::awaitNext).getMessage().contains("nothing submitted"));
                    // Nothing was sent, so the ring still works.
                    try (Tensor out = attention.forward(q, q, v, true)) {
                        assertTrue(out.allclose(v, RTOL, ATOL, false));
                    }
                }
            });
        }
    }
}
