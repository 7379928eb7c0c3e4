package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link RingAttention} with what model code passes: blocks of the balanced split (7 and 13 positions over 4 ranks, 3
 * over 4 with an empty block), a key sequence of another length, boolean and additive masks with rows that mask every
 * key, grouped-query heads and a scale; each rank's rows equal torch's {@code scaled_dot_product_attention} of the whole
 * tensors on one device (float32, {@code rtol = atol = 1e-5}), fully-masked rows included (torch gives zeros).
 */
@Timeout(60)
class RingAttentionBlocksTest {
    private static final double TOL = 1e-5;

    /** What a case attends with: nothing, a causal rule, a boolean or a float mask. */
    enum Masking { NONE, CAUSAL, BOOL, FLOAT }

    @ParameterizedTest(name = "{0} world={1} seq={2}/{3} {4} heads={5}/{6}")
    @CsvSource({
        "GLOO, 4, 7, 7, CAUSAL, 2, 2", "GLOO, 4, 13, 13, BOOL, 2, 2", "GLOO, 4, 3, 3, CAUSAL, 2, 2", "GLOO, 4, 3, 5, FLOAT, 2, 2",
        "GLOO, 2, 7, 7, FLOAT, 8, 2", "GLOO, 4, 13, 6, NONE, 8, 2", "GLOO, 4, 6, 9, CAUSAL, 4, 1",
        "SAME_DEVICE, 4, 7, 7, BOOL, 8, 2", "SAME_DEVICE, 4, 3, 3, FLOAT, 2, 2", "SAME_DEVICE, 2, 5, 5, CAUSAL, 2, 2"})
    void shouldEqualTorchsAttentionOverUnevenAndEmptyBlocks(Backend backend, int world, long seq, long keySeq, Masking masking,
                                                            long heads, long keyHeads) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(60),
                rank -> rankEqualsTorch(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), seq, keySeq, masking,
                    heads, keyHeads));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    private static List<String> rankEqualsTorch(ThreadGroup group, long seq, long keySeq, Masking masking, long heads, long keyHeads) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        boolean gqa = heads != keyHeads;
        double scale = masking == Masking.FLOAT ? 0.3 : Double.NaN;
        List<String> failed = new ArrayList<>();
        Tensor[] inputs = draw(seq * 101 + keySeq, masking, heads, keyHeads, seq, keySeq);
        try (Tensor q = inputs[0]; Tensor k = inputs[1]; Tensor v = inputs[2]; Tensor mask = inputs[3];
             Tensor want = torch.scaled_dot_product_attention(q, k, v, mask.defined() ? new TensorOptional(mask) : new TensorOptional(), 0.0,
                 masking == Masking.CAUSAL, Double.isNaN(scale) ? new DoubleOptional() : new DoubleOptional(scale), gqa);
             RingAttention attention = new RingAttention(group)) {
            long[] keyOffsets = BalancedSplit.offsets(keySeq, world);
            long[] keyLengths = BalancedSplit.sizes(keySeq, world);
            long queryOffset = BalancedSplit.offset(seq, world, rank);
            long rows = BalancedSplit.size(seq, world, rank);
            RingAttention.Blocks blocks = new RingAttention.Blocks(queryOffset, keyOffsets, keyLengths);
            RingAttention.Options options = new RingAttention.Options(masking == Masking.CAUSAL, scale, gqa);
            try (Tensor localQ = q.narrow(2, queryOffset, rows).contiguous();
                 Tensor localK = k.narrow(2, keyOffsets[rank], keyLengths[rank]).contiguous();
                 Tensor localV = v.narrow(2, keyOffsets[rank], keyLengths[rank]).contiguous();
                 Tensor localMask = mask.defined() ? mask.narrow(-2, queryOffset, rows) : new Tensor();
                 Tensor expected = want.narrow(2, queryOffset, rows);
                 Tensor got = attention.forward(localQ, localK, localV, mask.defined() ? localMask : null, blocks, options)) {
                if (!Arrays.equals(expected.sizes().vec().get(), got.sizes().vec().get()) || !got.allclose(expected, TOL, TOL, false)) {
                    failed.add("rank " + rank + " rows " + queryOffset + "+" + rows + ": " + TestTensors.diff(expected, got));
                }
            }
        }
        return failed;
    }

    /** q, k, v and the mask from one seed: every rank thread draws the same, one at a time (the generator is global). */
    private static synchronized Tensor[] draw(long seed, Masking masking, long heads, long keyHeads, long seq, long keySeq) {
        torch.manual_seed(seed);
        return new Tensor[] {torch.randn(2, heads, seq, 4), torch.randn(2, keyHeads, keySeq, 4), torch.randn(2, keyHeads, keySeq, 3),
            mask(masking, heads, seq, keySeq)};
    }

    /**
     * The case's mask, undefined for none or causal: a boolean {@code [L, S]} mask whose row 1 masks every key, or a float
     * {@code [B, H, L, S]} one whose row 0 of one head is minus infinity throughout.
     */
    private static Tensor mask(Masking masking, long heads, long seq, long keySeq) {
        switch (masking) {
            case BOOL -> {
                try (Tensor r = torch.rand(seq, keySeq); Scalar half = new Scalar(0.4); Scalar no = new Scalar(0)) {
                    Tensor m = r.gt(half);
                    if (seq > 1) {
                        try (Tensor row = m.select(0, 1)) {
                            row.fill_(no);
                        }
                    }
                    return m;
                }
            }
            case FLOAT -> {
                Tensor m = torch.randn(2, heads, seq, keySeq);
                try (Tensor row = m.select(1, heads - 1); Tensor first = row.select(1, 0); Scalar minus = new Scalar(Double.NEGATIVE_INFINITY)) {
                    first.fill_(minus);
                }
                return m;
            }
            default -> {
                return new Tensor();
            }
        }
    }
}
