package org.dtorch.core.communication.group;

import java.util.Arrays;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Reference ring attention of one rank: the sequence is split in equal contiguous blocks over the ring group, rank
 * {@code r} holding rows {@code [r * S, (r + 1) * S)} of Q, K and V; Q stays, K/V blocks rotate through a
 * {@link RingP2PComm}, and each block's attention is merged into the running result by its log-sum-exp:
 *
 * <pre>
 *   scores = q @ k_j^T * scale          lse_j = logsumexp(scores, -1)      out_j = exp(scores - lse_j) @ v_j
 *   lse'   = logaddexp(lse, lse_j)      out'  = out * exp(lse - lse') + out_j * exp(lse_j - lse')
 * </pre>
 *
 * <p>The result is this rank's rows of {@code softmax(Q K^T * scale) V} over the whole sequence, with
 * {@code scale = 1 / sqrt(D)} as torch's {@code scaled_dot_product_attention}. Causal attention masks the diagonal
 * block above its diagonal and skips the blocks of later ranks (they still pass through). Every operation is a
 * libtorch operator on whole blocks.
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank calls {@link #forward} in the same order with equal
 * shapes.
 */
public final class RingAttention implements AutoCloseable {
    private final RingP2PComm ring;

    /** Ring attention over {@code group}'s ranks; the group stays owned by the caller, the receive buffers by this. */
    public RingAttention(ThreadGroup group) {
        this.ring = new RingP2PComm(group);
    }

    /**
     * This rank's attention output {@code [..., S, Dv]} for its query rows {@code q [..., S, D]} against the keys
     * {@code k [..., S_k, D]} and values {@code v [..., S_k, Dv]} of the whole ring (leading dimensions equal, no
     * broadcasting). Checked before anything moves: floating dtype shared by the three, one device, matching sizes, and
     * for {@code causal} {@code S == S_k}. The result is a new tensor the caller closes.
     *
     * @throws IllegalArgumentException naming the rank and the offending tensors
     */
    public Tensor forward(Tensor q, Tensor k, Tensor v, boolean causal) {
        check(q, k, v, causal);
        int world = ring.group().getWorldSize();
        int rank = ring.group().getRank();
        double scale = 1.0 / Math.sqrt(q.size(q.dim() - 1));
        Tensor out = null;
        Tensor lse = null;
        DiagonalMask mask = causal ? new DiagonalMask(q) : null;
        try (Scalar factor = new Scalar(scale); Tensor scaledQ = q.mul(factor)) {
            RingP2PComm.KvBlock block = ring.begin(k, v);
            for (int step = 0; step < world; step++) {
                int source = (rank - step + world) % world;
                if (step + 1 < world) {
                    ring.submitNext();
                }
                if (!causal || source <= rank) {
                    Tensor[] merged = merge(out, lse, scaledQ, block, source == rank ? mask : null);
                    out = merged[0];
                    lse = merged[1];
                }
                block.close();
                if (step + 1 < world) {
                    block = ring.awaitNext();
                }
            }
        } finally {
            if (mask != null) {
                mask.close();
            }
            if (lse != null) {
                lse.close();
            }
        }
        return out;
    }

    /** Releases the receive buffers. Idempotent. */
    @Override
    public void close() {
        ring.close();
    }

    /** Attends {@code block} and merges it into {@code out}/{@code lse} (closed here); returns the new pair. */
    private static Tensor[] merge(Tensor out, Tensor lse, Tensor scaledQ, RingP2PComm.KvBlock block, DiagonalMask mask) {
        Tensor blockOut;
        Tensor blockLse;
        try (Tensor kt = block.k().transpose(-2, -1); Tensor scores = scaledQ.matmul(kt)) {
            if (mask != null) {
                scores.masked_fill_(mask.above, mask.minusInfinity);
            }
            blockLse = scores.logsumexp(new long[] {-1}, true);
            try (Tensor shifted = scores.sub(blockLse); Tensor weights = shifted.exp()) {
                blockOut = weights.matmul(block.v());
            }
        }
        if (out == null) {
            return new Tensor[] {blockOut, blockLse};
        }
        Tensor newLse = torch.logaddexp(lse, blockLse);
        try (out; lse; blockOut; blockLse;
             Tensor keepOld = lse.sub(newLse); Tensor oldWeight = keepOld.exp();
             Tensor keepNew = blockLse.sub(newLse); Tensor newWeight = keepNew.exp();
             Tensor oldPart = out.mul(oldWeight); Tensor newPart = blockOut.mul(newWeight)) {
            return new Tensor[] {oldPart.add(newPart), newLse};
        }
    }

    private void check(Tensor q, Tensor k, Tensor v, boolean causal) {
        for (Tensor t : new Tensor[] {q, k, v}) {
            if (t == null || t.isNull() || !t.defined() || t.dim() < 2 || !torch.is_floating_point(t)) {
                throw rejected("q, k and v must be floating tensors [..., S, D]", q, k, v);
            }
        }
        long[] qs = TorchTensors.shape(q);
        long[] ks = TorchTensors.shape(k);
        int n = qs.length;
        if (TorchTensors.dtype(q) != TorchTensors.dtype(k) || !TorchTensors.device(q).equals(TorchTensors.device(k))
            || ks.length != n || !Arrays.equals(qs, 0, n - 2, ks, 0, n - 2) || qs[n - 1] != ks[n - 1]) {
            throw rejected("q and k need one dtype and device, equal leading sizes and head dimension", q, k, v);
        }
        if (causal && qs[n - 2] != ks[n - 2]) {
            throw rejected("causal ring attention needs query and key blocks of one length", q, k, v);
        }
        // v against k is checked by RingP2PComm.begin, still before anything moves.
    }

    private IllegalArgumentException rejected(String what, Tensor q, Tensor k, Tensor v) {
        return new IllegalArgumentException("RingAttention.forward (rank " + ring.group().getRank() + " of " + ring.group().getWorldSize()
            + "): " + what + ", got q " + TorchTensors.describe(q) + ", k " + TorchTensors.describe(k) + ", v " + TorchTensors.describe(v));
    }

    /** The causal mask of the diagonal block: true above the diagonal, where scores become minus infinity. */
    private static final class DiagonalMask implements AutoCloseable {
        final Tensor above;
        final Scalar minusInfinity = new Scalar(Double.NEGATIVE_INFINITY);

        DiagonalMask(Tensor q) {
            long s = q.size(q.dim() - 2);
            try (TensorOptions options = TorchTensors.options(ScalarType.Bool, TorchTensors.device(q));
                 Tensor ones = torch.ones(new long[] {s, s}, options)) {
                above = torch.triu(ones, 1);
            }
        }

        @Override
        public void close() {
            above.close();
            minusInfinity.close();
        }
    }
}
