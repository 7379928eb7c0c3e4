package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link RingAttentionSpec} against torch's {@code scaled_dot_product_attention} of the whole tensors on one device: 2-,
 * 4- and 2x2-device meshes, causal and not, a key sequence of another length, the sequence sharded with the batch, the
 * refusals before anything moves. Float32, {@code rtol = 1e-4, atol = 1e-5}, as the per-rank {@code RingAttentionTest}.
 */
@Timeout(120)
class RingAttentionSpecTest {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S2 = Placement.shard(2);
    static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).build());
    }

    @AfterAll
    static void stop() {
        SharedWorkerProcesses.closeUnlessShared(dt);
    }

    /** Ring attention of random {@code [2, 2, seq, 4]} queries against {@code kvSeq} keys, checked against torch. */
    static void assertLikeTorch(DTorch runtime, int[] meshShape, List<Placement> placements, long seq, long kvSeq, boolean causal) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        Placement[] ps = placements.toArray(Placement[]::new);
        torch.manual_seed(seq * 31 + kvSeq);
        try (Tensor q = torch.randn(2, 2, seq, 4); Tensor k = torch.randn(2, 2, kvSeq, 4); Tensor v = torch.randn(2, 2, kvSeq, 5);
             Tensor want = torch.scaled_dot_product_attention(q, k, v, new TensorOptional(), 0.0, causal, new DoubleOptional(), false);
             DTensor dq = runtime.tensor(q, mesh, ps); DTensor dk = runtime.tensor(k, mesh, ps); DTensor dv = runtime.tensor(v, mesh, ps);
             DTensor out = RingAttentionSpec.attend(dq, dk, dv, causal); Tensor got = out.toTorch()) {
            String what = Arrays.toString(meshShape) + " " + placements + " seq " + seq + "/" + kvSeq + (causal ? " causal" : "");
            assertEquals(placements, out.placements(), what);
            assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(got.sizes().vec().get()), what);
            assertTrue(torch.allclose(got, want, 1e-4, 1e-5, false), what + ": values differ\n got  " + got + "\n want " + want);
        }
    }

    /**
     * Rings of 2 and 4 devices, over both dimensions of a 2x2 mesh and along one beside a batch shard or a replica, causal
     * or not; key sequences longer and shorter than the query's when not causal.
     */
    static void walk(DTorch runtime) {
        for (boolean causal : new boolean[] {false, true}) {
            assertLikeTorch(runtime, new int[] {2}, List.of(S2), 8, 8, causal);
            assertLikeTorch(runtime, new int[] {4}, List.of(S2), 8, 8, causal);
            assertLikeTorch(runtime, new int[] {2, 2}, List.of(S2, S2), 8, 8, causal);
            assertLikeTorch(runtime, new int[] {2, 2}, List.of(S0, S2), 4, 4, causal);
            assertLikeTorch(runtime, new int[] {2, 2}, List.of(S2, R), 4, 4, causal);
        }
        assertLikeTorch(runtime, new int[] {2}, List.of(S2), 4, 12, false);
        assertLikeTorch(runtime, new int[] {2, 2}, List.of(S2, S2), 8, 4, false);
    }

    @Test
    void shouldEqualTorchsAttentionOnEveryRingCausalOrNotWithKeySequencesOfOtherLengths() {
        walk(dt);
    }

    @Test
    void shouldMoveKeyAndValueToTheQuerysPlacementsFirst() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        torch.manual_seed(5);
        try (Tensor q = torch.randn(1, 2, 6, 4); Tensor k = torch.randn(1, 2, 6, 4); Tensor v = torch.randn(1, 2, 6, 4);
             Tensor want = torch.scaled_dot_product_attention(q, k, v, new TensorOptional(), 0.0, true, new DoubleOptional(), false);
             DTensor dq = dt.tensor(q, mesh, S2); DTensor dk = dt.tensor(k, mesh, R); DTensor dv = dt.tensor(v, mesh, Placement.shard(1));
             DTensor out = RingAttentionSpec.attend(dq, dk, dv, true); Tensor got = out.toTorch()) {
            assertEquals(List.of(S2), out.placements());
            assertTrue(torch.allclose(got, want, 1e-4, 1e-5, false));
        }
    }

    @Test
    void shouldRefuseWhatTheRingCannotTakeBeforeMovingAnything() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        try (DTensor q = dt.randn(1, new long[] {1, 2, 6, 4}, mesh, S2);
             DTensor byBatch = dt.randn(4, new long[] {2, 2, 6, 4}, mesh, S0);
             DTensor lastShard = dt.randn(5, new long[] {1, 2, 6, 4}, mesh, Placement.shard(3))) {
            String none = assertThrows(ShardingException.class, () -> RingAttentionSpec.attend(byBatch, byBatch, byBatch, false)).getMessage();
            assertTrue(none.contains("no mesh dimension shards the sequence"), none);
            String last = assertThrows(ShardingException.class, () -> RingAttentionSpec.attend(lastShard, lastShard, lastShard, false)).getMessage();
            assertTrue(last.contains("S(3) cannot be attended"), last);
            String direct = assertThrows(ShardingException.class, () -> dt.apply(new RingAttentionSpec(false), q, byBatch, byBatch)).getMessage();
            assertTrue(direct.contains("key and value must have the query's placements"), direct);
            // The runtime is still usable after the refusals.
            try (DTensor out = RingAttentionSpec.attend(q, q, q, false)) {
                assertEquals(List.of(S2), out.placements());
            }
        }
    }
}
