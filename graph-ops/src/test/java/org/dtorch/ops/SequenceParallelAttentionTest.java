package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Sequence-parallel attention with what model code passes, against libtorch's {@code scaled_dot_product_attention} of
 * the whole tensors on one device (float32, {@code rtol = atol = 1e-5}): causal attention, boolean {@code [L, S]} and
 * float {@code [B, 1, L, S]} / {@code [B, H, L, S]} masks (each with a row that masks every key, which torch answers with
 * zeros), grouped-query heads (8 query heads over 2 key heads), sequences of 7 and 13 over 4 devices and of 3 over 4
 * (an empty shard), on meshes of 2 and 4 devices and 2x2. The ring is {@link RingAttentionSpec}; Ulysses is its two
 * moves (sequence shards to head shards, the generic attention operator on whole sequences, and back), which the
 * Python {@code strategy="ulysses"} makes; USP moves the inner mesh dimension's sequence shards to heads and rings over
 * the outer one. A representative set runs by default, the whole matrix under {@code slow}.
 */
@Timeout(300)
class SequenceParallelAttentionTest extends FourDeviceRuntime {
    private static final double TOL = 1e-5;
    private static final Placement R = Placement.replicate();
    private static final Placement S2 = Placement.shard(2);

    /** How the sequence-sharded attention runs. */
    enum Strategy { RING, ULYSSES, USP }

    /** What the attention is masked by. */
    enum Masking { NONE, CAUSAL, BOOL, FLOAT_BROADCAST_HEADS, FLOAT_PER_HEAD }

    /** One case: the strategy, the mesh, query/key sequence lengths, query/key heads, the masking. */
    record Case(Strategy strategy, int[] mesh, long seq, long keySeq, long heads, long keyHeads, Masking masking) {
        @Override
        public String toString() {
            return strategy + " on " + Arrays.toString(mesh) + ", seq " + seq + "/" + keySeq + ", heads " + heads + "/" + keyHeads + ", "
                + masking;
        }
    }

    static Case ring(int[] mesh, long seq, long heads, long keyHeads, Masking masking) {
        return new Case(Strategy.RING, mesh, seq, seq, heads, keyHeads, masking);
    }

    /**
     * Distributes random inputs sharded on the sequence over every mesh dimension, runs {@code c}'s strategy and
     * compares the output (values and placements: the query's) with libtorch's attention on one device.
     */
    static void assertLikeTorch(DTorch runtime, Case c) {
        DeviceMesh mesh = runtime.initDeviceMesh(c.mesh());
        Placement[] bySequence = Collections.nCopies(c.mesh().length, S2).toArray(Placement[]::new);
        boolean gqa = c.heads() != c.keyHeads();
        boolean causal = c.masking() == Masking.CAUSAL;
        torch.manual_seed(c.seq() * 131 + c.keySeq() * 7 + c.heads());
        try (Tensor q = torch.randn(2, c.heads(), c.seq(), 4); Tensor k = torch.randn(2, c.keyHeads(), c.keySeq(), 4);
             Tensor v = torch.randn(2, c.keyHeads(), c.keySeq(), 3); Tensor mask = mask(c);
             Tensor want = torch.scaled_dot_product_attention(q, k, v, mask.defined() ? new TensorOptional(mask) : new TensorOptional(), 0.0,
                 causal, new DoubleOptional(), gqa);
             DTensor dq = runtime.tensor(q, mesh, bySequence); DTensor dk = runtime.tensor(k, mesh, bySequence);
             DTensor dv = runtime.tensor(v, mesh, bySequence);
             DTensor dm = mask.defined() ? runtime.tensor(mask, mesh, Collections.nCopies(c.mesh().length, R).toArray(Placement[]::new)) : null;
             DTensor out = attend(c, dq, dk, dv, dm, causal, gqa); Tensor got = out.toTorch()) {
            assertEquals(List.of(bySequence), out.placements(), c.toString());
            assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(got.sizes().vec().get()), c.toString());
            assertTrue(torch.allclose(got, want, TOL, TOL, false), c + ": values differ\n got  " + got + "\n want " + want);
        }
    }

    private static DTensor attend(Case c, DTensor q, DTensor k, DTensor v, DTensor mask, boolean causal, boolean gqa) {
        return switch (c.strategy()) {
            case RING -> RingAttentionSpec.attend(q, k, v, mask, causal, Double.NaN, gqa);
            case ULYSSES -> aroundHeads(q, k, v, c.mesh().length, -1, (hq, hk, hv) -> plain(hq, hk, hv, mask, causal, gqa));
            case USP -> aroundHeads(q, k, v, c.mesh().length, c.mesh().length - 1,
                (hq, hk, hv) -> RingAttentionSpec.attend(hq, hk, hv, mask, causal, Double.NaN, gqa));
        };
    }

    /** What runs on head shards. */
    private interface OnHeads {
        DTensor attend(DTensor q, DTensor k, DTensor v);
    }

    /**
     * Moves the sequence shards of every mesh dimension (Ulysses, {@code inner} -1) or of the innermost only (USP) to head
     * shards, attends, and moves the output back.
     */
    private static DTensor aroundHeads(DTensor q, DTensor k, DTensor v, int meshDims, int inner, OnHeads onHeads) {
        Placement[] toHeads = new Placement[meshDims];
        for (int m = 0; m < meshDims; m++) {
            toHeads[m] = inner < 0 || m == inner ? Placement.shard(1) : S2;
        }
        List<DTensor> moved = new ArrayList<>();
        try {
            for (DTensor t : List.of(q, k, v)) {
                moved.add(t.redistribute(q.meta().sharding().mesh(), toHeads));
            }
            try (DTensor out = onHeads.attend(moved.get(0), moved.get(1), moved.get(2))) {
                return out.redistribute(q.meta().sharding().mesh(), q.placements().toArray(Placement[]::new));
            }
        } finally {
            moved.forEach(DTensor::close);
        }
    }

    private static DTensor plain(DTensor q, DTensor k, DTensor v, DTensor mask, boolean causal, boolean gqa) {
        AtenCall call = mask == null
            ? GenericOpsTest.call("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null, causal, gqa)
            : GenericOpsTest.call("scaled_dot_product_attention", "T,T,T,T|enable_gqa=b", null, null, null, null, gqa);
        return mask == null ? q.runtime().aten(call, q, k, v).getFirst() : q.runtime().aten(call, q, k, v, mask).getFirst();
    }

    /**
     * The case's mask (undefined for none or causal): boolean {@code [L, S]} whose row 1 masks every key; float
     * {@code [B, 1, L, S]}; float {@code [B, H, L, S]} whose row 0 of the last head is minus infinity throughout.
     */
    static Tensor mask(Case c) {
        long l = c.seq();
        long s = c.keySeq();
        switch (c.masking()) {
            case BOOL -> {
                try (Tensor r = torch.rand(l, s); Scalar share = new Scalar(0.4); Scalar no = new Scalar(0)) {
                    Tensor m = r.gt(share);
                    if (l > 1) {
                        try (Tensor row = m.select(0, 1)) {
                            row.fill_(no);
                        }
                    }
                    return m;
                }
            }
            case FLOAT_BROADCAST_HEADS -> {
                return torch.randn(2, 1, l, s);
            }
            case FLOAT_PER_HEAD -> {
                Tensor m = torch.randn(2, c.heads(), l, s);
                try (Tensor head = m.select(1, c.heads() - 1); Tensor row = head.select(1, 0);
                     Scalar minus = new Scalar(Double.NEGATIVE_INFINITY)) {
                    row.fill_(minus);
                }
                return m;
            }
            default -> {
                return new Tensor();
            }
        }
    }

    private static final int[] TWO = {2};
    private static final int[] FOUR = {4};
    private static final int[] TWO_BY_TWO = {2, 2};

    /** The default set: each feature on each strategy at least once. */
    static List<Case> representative() {
        return List.of(
            ring(FOUR, 7, 2, 2, Masking.CAUSAL), ring(FOUR, 13, 8, 2, Masking.BOOL), ring(FOUR, 3, 2, 2, Masking.CAUSAL),
            ring(TWO, 7, 2, 2, Masking.FLOAT_BROADCAST_HEADS), ring(TWO_BY_TWO, 13, 8, 2, Masking.FLOAT_PER_HEAD),
            new Case(Strategy.RING, FOUR, 6, 9, 2, 2, Masking.CAUSAL), ring(FOUR, 3, 2, 2, Masking.BOOL),
            new Case(Strategy.ULYSSES, FOUR, 7, 7, 4, 4, Masking.BOOL), new Case(Strategy.ULYSSES, FOUR, 13, 13, 8, 4, Masking.CAUSAL),
            new Case(Strategy.ULYSSES, FOUR, 3, 3, 4, 4, Masking.FLOAT_PER_HEAD), new Case(Strategy.ULYSSES, TWO, 7, 7, 8, 2, Masking.CAUSAL),
            new Case(Strategy.USP, TWO_BY_TWO, 7, 7, 8, 2, Masking.CAUSAL), new Case(Strategy.USP, TWO_BY_TWO, 13, 13, 4, 2, Masking.BOOL),
            new Case(Strategy.USP, TWO_BY_TWO, 3, 3, 4, 4, Masking.FLOAT_PER_HEAD));
    }

    @Test
    void shouldEqualTorchsAttentionWithMasksGroupedHeadsAndUnevenOrEmptyShardsInEveryStrategy() {
        for (Case c : representative()) {
            assertLikeTorch(dt, c);
        }
    }

    @Test
    @Tag("slow")
    void shouldEqualTorchsAttentionOnTheWholeMatrix() {
        long[][] heads = {{4, 4}, {8, 2}};
        for (Strategy strategy : Strategy.values()) {
            for (int[] mesh : strategy == Strategy.USP ? new int[][] {TWO_BY_TWO} : new int[][] {TWO, FOUR, TWO_BY_TWO}) {
                int ways = Arrays.stream(mesh).reduce(1, (a, b) -> a * b);
                int headWays = strategy == Strategy.RING ? 1 : strategy == Strategy.USP ? mesh[mesh.length - 1] : ways;
                for (long seq : new long[] {7, 13, 3}) {
                    for (long[] h : heads) {
                        if (h[1] % headWays != 0) {
                            continue; // Python's strategy="ulysses" repeats such key heads first; test_sp_attention_masks.py covers it.
                        }
                        for (Masking masking : Masking.values()) {
                            assertLikeTorch(dt, new Case(strategy, mesh, seq, seq, h[0], h[1], masking));
                        }
                    }
                }
            }
        }
    }

    @Test
    void shouldMoveAMaskShardedLikeTheQueryToTheRowsTheRingNeeds() {
        DeviceMesh mesh = dt.initDeviceMesh(FOUR);
        torch.manual_seed(3);
        try (Tensor q = torch.randn(1, 2, 7, 4); Tensor m = torch.randn(1, 2, 7, 7);
             Tensor want = torch.scaled_dot_product_attention(q, q, q, new TensorOptional(m), 0.0, false, new DoubleOptional(), false);
             DTensor dq = dt.tensor(q, mesh, S2); DTensor byKeys = dt.tensor(m, mesh, Placement.shard(3));
             DTensor out = RingAttentionSpec.attend(dq, dq, dq, byKeys, false, Double.NaN, false); Tensor got = out.toTorch()) {
            assertTrue(torch.allclose(got, want, TOL, TOL, false));
            assertEquals(List.of(Placement.shard(2)), RingAttentionSpec.maskSharding(byKeys.meta(), dq.meta().sharding(), 4).placements());
        }
    }

    @Test
    void shouldRefuseWhatTorchRefusesAndSplitGroupsBeforeMovingAnything() {
        DeviceMesh square = dt.initDeviceMesh(TWO_BY_TWO);
        Placement[] headsAndSequence = {Placement.shard(1), S2};
        try (DTensor q = dt.randn(1, new long[] {1, 8, 6, 4}, square, headsAndSequence);
             DTensor oneHead = dt.randn(2, new long[] {1, 1, 6, 4}, square, headsAndSequence);
             DTensor mask = dt.randn(3, new long[] {6, 6}, square, R, R);
             DTensor ints = dt.zeros(new long[] {6, 6}, ScalarType.Long, square, R, R);
             DTensor wide = dt.randn(4, new long[] {6, 5}, square, R, R)) {
            String causal = assertThrows(IllegalArgumentException.class,
                () -> RingAttentionSpec.attend(q, q, q, mask, true, Double.NaN, false)).getMessage();
            assertTrue(causal.contains("should not be set when is_causal"), causal);
            String groups = assertThrows(ShardingException.class,
                () -> RingAttentionSpec.attend(q, oneHead, oneHead, null, false, Double.NaN, true)).getMessage();
            assertTrue(groups.contains("8 query and 1 key heads over 2 devices would split a query group"), groups);
            String dtype = assertThrows(IllegalArgumentException.class,
                () -> RingAttentionSpec.attend(q, q, q, ints, false, Double.NaN, false)).getMessage();
            assertTrue(dtype.contains("attn_mask must be boolean, float or the query's dtype"), dtype);
            String shape = assertThrows(IllegalArgumentException.class,
                () -> RingAttentionSpec.attend(q, q, q, wide, false, Double.NaN, false)).getMessage();
            assertTrue(shape.contains("does not broadcast to the attention scores [1, 8, 6, 6]"), shape);
            String placed = assertThrows(ShardingException.class, () -> dt.apply(new RingAttentionSpec(false), q, q, q, mask)).getMessage();
            assertTrue(placed.contains("attn_mask must have placements [R, S(0)]"), placed);
            // Nothing moved: the runtime still attends.
            try (DTensor out = RingAttentionSpec.attend(q, q, q, mask, false, 0.5, false)) {
                assertEquals(List.of(headsAndSequence), out.placements());
            }
        }
    }
}
