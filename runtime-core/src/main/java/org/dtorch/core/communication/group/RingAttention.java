package org.dtorch.core.communication.group;

import java.util.Arrays;
import java.util.Objects;
import org.bytedeco.pytorch.LongOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Reference ring attention of one rank: the sequence is split in contiguous blocks over the ring group, group rank
 * {@code r} holding the keys and values of global positions {@code [keyOffset(r), keyOffset(r) + keyLength(r))} and
 * some query rows; Q stays, K/V blocks rotate through a {@link RingP2PComm}, and each block's attention is merged into
 * the running result by its log-sum-exp:
 *
 * <pre>
 *   scores = q @ k_j^T * scale (+ mask)  lse_j = logsumexp(scores, -1)      out_j = exp(scores - lse_j) @ v_j
 *   lse'   = logaddexp(lse, lse_j)      out'  = out * exp(lse - lse') + out_j * exp(lse_j - lse')
 * </pre>
 *
 * <p>The result is this rank's rows of torch's {@code scaled_dot_product_attention(Q, K, V, attn_mask, is_causal,
 * scale, enable_gqa)} over the whole sequence. Blocks may differ in length, and may be empty (a sequence shorter than
 * the ring): they travel padded to the longest block and are narrowed on arrival; an empty block is never merged.
 * Causal attention (top-left aligned, as torch's {@code is_causal}) compares global positions: a block wholly after
 * this rank's last query row is skipped (it still passes through), one wholly before its first row is attended whole,
 * and only a block that straddles them is masked. A row whose every key is masked (by the mask, the causal rule or
 * both) gets zeros, as torch's attention gives on one device; the merge keeps such rows at a log-sum-exp of minus
 * infinity and weighs them by zero instead of subtracting infinities. With grouped-query attention the smaller key and
 * value rotate, and each block's heads are repeated for their query groups only when it is attended. Every operation
 * is a libtorch operator on whole blocks.
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank calls {@link #forward} in the same order with equal
 * shapes but for the sequence's length.
 */
public final class RingAttention implements AutoCloseable {
    private final RingP2PComm ring;

    /**
     * Where each group rank's keys sit in the global key sequence, and where this rank's query rows sit in the global
     * query sequence. Thread-safe: immutable (the arrays are copied in and out).
     *
     * @param queryOffset the global position of this rank's first query row
     * @param keyOffsets  per group rank, the global position of its first key
     * @param keyLengths  per group rank, how many keys it holds (zero for an empty block)
     */
    public record Blocks(long queryOffset, long[] keyOffsets, long[] keyLengths) {
        /** Checks the arrays' lengths and signs. */
        public Blocks {
            Objects.requireNonNull(keyOffsets, "keyOffsets");
            Objects.requireNonNull(keyLengths, "keyLengths");
            if (keyOffsets.length != keyLengths.length || queryOffset < 0 || Arrays.stream(keyOffsets).anyMatch(o -> o < 0)
                || Arrays.stream(keyLengths).anyMatch(l -> l < 0)) {
                throw new IllegalArgumentException("ring attention blocks: one non-negative key offset and length per rank and a"
                    + " non-negative query offset, got query offset " + queryOffset + ", key offsets " + Arrays.toString(keyOffsets)
                    + ", key lengths " + Arrays.toString(keyLengths));
            }
            keyOffsets = keyOffsets.clone();
            keyLengths = keyLengths.clone();
        }

        /** Equal blocks of {@code queryBlock} query rows and {@code keyBlock} keys per rank, rank {@code rank} of {@code world}. */
        public static Blocks even(int rank, int world, long queryBlock, long keyBlock) {
            long[] offsets = new long[world];
            long[] lengths = new long[world];
            for (int r = 0; r < world; r++) {
                offsets[r] = r * keyBlock;
                lengths[r] = keyBlock;
            }
            return new Blocks(rank * queryBlock, offsets, lengths);
        }

        @Override
        public long[] keyOffsets() {
            return keyOffsets.clone();
        }

        @Override
        public long[] keyLengths() {
            return keyLengths.clone();
        }

        long longest() {
            return Arrays.stream(keyLengths).max().orElse(0);
        }

        long keyTotal() {
            long end = 0;
            for (int r = 0; r < keyOffsets.length; r++) {
                end = Math.max(end, keyOffsets[r] + keyLengths[r]);
            }
            return end;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Blocks b && b.queryOffset == queryOffset && Arrays.equals(b.keyOffsets, keyOffsets)
                && Arrays.equals(b.keyLengths, keyLengths);
        }

        @Override
        public int hashCode() {
            return Objects.hash(queryOffset, Arrays.hashCode(keyOffsets), Arrays.hashCode(keyLengths));
        }

        @Override
        public String toString() {
            return "Blocks[queryOffset=" + queryOffset + ", keyOffsets=" + Arrays.toString(keyOffsets) + ", keyLengths="
                + Arrays.toString(keyLengths) + "]";
        }
    }

    /**
     * What torch's {@code scaled_dot_product_attention} takes beside the tensors. Thread-safe: immutable.
     *
     * @param causal    top-left aligned causal masking by global position, combined with a mask where both are given
     * @param scale     the factor of the scores; {@code NaN} for torch's default {@code 1 / sqrt(E)}
     * @param enableGqa whether key and value may have fewer heads (dimension {@code -3}) than the query, a divisor of its
     */
    public record Options(boolean causal, double scale, boolean enableGqa) {
        /** Plain attention with the default scale, causal or not. */
        public static Options of(boolean causal) {
            return new Options(causal, Double.NaN, false);
        }
    }

    /** Ring attention over {@code group}'s ranks; the group stays owned by the caller, the receive buffers by this. */
    public RingAttention(ThreadGroup group) {
        this.ring = new RingP2PComm(group);
    }

    /**
     * This rank's attention output {@code [..., S, Dv]} for its query rows {@code q [..., S, D]} against the keys
     * {@code k [..., S_k, D]} and values {@code v [..., S_k, Dv]} of the whole ring, every rank holding equal blocks
     * (rank {@code r} has query rows and keys from {@code r} blocks on); default scale, no mask, no grouped heads.
     *
     * @throws IllegalArgumentException naming the rank and the offending tensors
     */
    public Tensor forward(Tensor q, Tensor k, Tensor v, boolean causal) {
        int world = ring.group().getWorldSize();
        long queryBlock = q == null || q.isNull() || q.dim() < 2 ? 0 : q.size(-2);
        long keyBlock = k == null || k.isNull() || k.dim() < 2 ? 0 : k.size(-2);
        return forward(q, k, v, null, Blocks.even(ring.group().getRank(), world, queryBlock, keyBlock), Options.of(causal));
    }

    /**
     * This rank's attention output {@code [..., L_local, Dv]} for its query rows {@code q [..., H, L_local, D]} against
     * the keys {@code k [..., H_kv, S_local, D]} and values {@code v [..., H_kv, S_local, Dv]} that {@code blocks} places
     * in the global sequence. {@code mask}, when not null, is torch's {@code attn_mask} for this rank's query rows and
     * every key: boolean (true takes part) or additive floating, broadcastable to {@code [..., H, L_local, S]} (its last
     * dimension the global key length or 1, its second-to-last {@code L_local} or 1). Checked before anything moves:
     * floating dtype shared by the three, one device, matching sizes, this rank's key length against {@code blocks}, the
     * mask's dtype and shape. The result is a new tensor the caller closes.
     *
     * @throws IllegalArgumentException naming the rank and the offending tensors
     */
    public Tensor forward(Tensor q, Tensor k, Tensor v, Tensor mask, Blocks blocks, Options options) {
        Objects.requireNonNull(blocks, "blocks");
        Objects.requireNonNull(options, "options");
        check(q, k, v, mask, blocks, options);
        int world = ring.group().getWorldSize();
        int rank = ring.group().getRank();
        double scale = Double.isNaN(options.scale()) ? 1.0 / Math.sqrt(q.size(-1)) : options.scale();
        long groups = options.enableGqa() && q.dim() >= 3 ? q.size(-3) / k.size(-3) : 1;
        long rows = q.size(-2);
        long longest = blocks.longest();
        if (longest == 0) {
            return emptyKeysResult(q, v);
        }
        Merge merge = new Merge();
        try (Scalar factor = new Scalar(scale); Tensor scaledQ = q.mul(factor)) {
            RingP2PComm.KvBlock block = ring.begin(k, v, longest);
            for (int step = 0; step < world; step++) {
                int source = (rank - step + world) % world;
                if (step + 1 < world) {
                    ring.submitNext();
                }
                long keyOffset = blocks.keyOffsets[source];
                long keyLength = blocks.keyLengths[source];
                boolean after = options.causal() && keyOffset >= blocks.queryOffset() + rows;
                if (keyLength > 0 && rows > 0 && !after) {
                    merge.add(scaledQ, block, keyOffset, keyLength, blocks.queryOffset(), mask, options.causal(), groups);
                }
                block.close();
                if (step + 1 < world) {
                    block = ring.awaitNext();
                }
            }
            return merge.result(q, v);
        } finally {
            merge.close();
        }
    }

    /** Releases the receive buffers. Idempotent. */
    @Override
    public void close() {
        ring.close();
    }

    /** Zeros {@code [..., L_local, Dv]}: attention over no keys, as torch gives it. */
    private static Tensor emptyKeysResult(Tensor q, Tensor v) {
        long[] shape = TorchTensors.shape(q);
        shape[shape.length - 1] = v.size(-1);
        try (TensorOptions options = TorchTensors.options(TorchTensors.dtype(q), TorchTensors.device(q))) {
            return torch.zeros(shape, options);
        }
    }

    /** The running output and log-sum-exp of one forward call; closes what it replaces. */
    private static final class Merge implements AutoCloseable {
        private Tensor out;
        private Tensor lse;

        /** Attends the first {@code keyLength} keys of {@code block}, at {@code keyOffset} globally, and merges them in. */
        void add(Tensor scaledQ, RingP2PComm.KvBlock block, long keyOffset, long keyLength, long queryOffset, Tensor mask,
                 boolean causal, long groups) {
            Tensor blockOut;
            Tensor blockLse;
            try (Tensor k = block.k().narrow(-2, 0, keyLength); Tensor v = block.v().narrow(-2, 0, keyLength);
                 Tensor kg = repeatHeads(k, groups); Tensor vg = repeatHeads(v, groups);
                 Tensor kt = kg.transpose(-2, -1); Tensor scores = scaledQ.matmul(kt)) {
                if (mask != null) {
                    applyMask(scores, mask, keyOffset, keyLength);
                }
                if (causal && keyOffset + keyLength - 1 > queryOffset) {
                    try (Tensor above = causalAbove(scaledQ, queryOffset, keyOffset, keyLength);
                         Scalar minusInfinity = new Scalar(Double.NEGATIVE_INFINITY)) {
                        scores.masked_fill_(above, minusInfinity);
                    }
                }
                blockLse = scores.logsumexp(new long[] {-1}, true);
                try (Tensor safe = finite(blockLse); Tensor shifted = scores.sub(safe); Tensor weights = shifted.exp()) {
                    blockOut = weights.matmul(vg);
                }
            }
            if (out == null) {
                out = blockOut;
                lse = blockLse;
                return;
            }
            Tensor newLse = torch.logaddexp(lse, blockLse);
            try (Tensor oldOut = out; Tensor oldLse = lse; blockOut; blockLse; Tensor safe = finite(newLse);
                 Tensor keepOld = oldLse.sub(safe); Tensor oldWeight = keepOld.exp();
                 Tensor keepNew = blockLse.sub(safe); Tensor newWeight = keepNew.exp();
                 Tensor oldPart = oldOut.mul(oldWeight); Tensor newPart = blockOut.mul(newWeight)) {
                out = oldPart.add(newPart);
                lse = newLse;
            }
        }

        /** The merged output, handed to the caller; zeros where no block was attended. */
        Tensor result(Tensor q, Tensor v) {
            if (out == null) {
                return emptyKeysResult(q, v);
            }
            Tensor result = out;
            out = null;
            return result;
        }

        @Override
        public void close() {
            if (out != null) {
                out.close();
                out = null;
            }
            if (lse != null) {
                lse.close();
                lse = null;
            }
        }
    }

    /**
     * {@code lse} with minus infinity replaced by zero: a row with no key to attend then subtracts a finite number from
     * minus infinity and weighs by {@code exp(-inf) = 0}, where {@code -inf - -inf} would give NaN.
     */
    private static Tensor finite(Tensor lse) {
        try (Tensor none = torch.isneginf(lse); Scalar zero = new Scalar(0.0)) {
            return lse.masked_fill(none, zero);
        }
    }

    /** The key or value heads repeated for their query groups ({@code h -> h / groups}, as torch's {@code enable_gqa}). */
    private static Tensor repeatHeads(Tensor t, long groups) {
        if (groups == 1) {
            return t.alias();
        }
        return torch.repeat_interleave(t, groups, new LongOptional(t.dim() - 3), new LongOptional());
    }

    /** Adds or applies the mask's columns of the block at {@code keyOffset} (all of them where it broadcasts the keys). */
    private static void applyMask(Tensor scores, Tensor mask, long keyOffset, long keyLength) {
        try (Tensor columns = mask.size(-1) == 1 ? mask.alias() : mask.narrow(-1, keyOffset, keyLength)) {
            if (TorchTensors.dtype(mask) == ScalarType.Bool) {
                try (Tensor excluded = columns.logical_not(); Scalar minusInfinity = new Scalar(Double.NEGATIVE_INFINITY)) {
                    scores.masked_fill_(excluded, minusInfinity);
                }
            } else {
                scores.add_(columns);
            }
        }
    }

    /** True where a key's global position is after its query row's: {@code [L_local, keyLength]}. */
    private static Tensor causalAbove(Tensor q, long queryOffset, long keyOffset, long keyLength) {
        try (TensorOptions options = TorchTensors.options(ScalarType.Long, TorchTensors.device(q));
             Scalar rowStart = new Scalar(queryOffset); Scalar rowEnd = new Scalar(queryOffset + q.size(-2));
             Scalar colStart = new Scalar(keyOffset); Scalar colEnd = new Scalar(keyOffset + keyLength);
             Tensor rowPositions = torch.arange(rowStart, rowEnd, options); Tensor rowColumn = rowPositions.unsqueeze(1);
             Tensor colPositions = torch.arange(colStart, colEnd, options)) {
            return colPositions.gt(rowColumn);
        }
    }

    private void check(Tensor q, Tensor k, Tensor v, Tensor mask, Blocks blocks, Options options) {
        for (Tensor t : new Tensor[] {q, k, v}) {
            if (t == null || t.isNull() || !t.defined() || t.dim() < 2 || !torch.is_floating_point(t)) {
                throw rejected("q, k and v must be floating tensors [..., S, D]", q, k, v);
            }
        }
        long[] qs = TorchTensors.shape(q);
        long[] ks = TorchTensors.shape(k);
        int n = qs.length;
        boolean grouped = options.enableGqa() && n >= 3 && ks.length == n && ks[n - 3] > 0 && qs[n - 3] % ks[n - 3] == 0;
        int leading = grouped ? n - 3 : n - 2;
        if (TorchTensors.dtype(q) != TorchTensors.dtype(k) || !TorchTensors.device(q).equals(TorchTensors.device(k))
            || ks.length != n || !Arrays.equals(qs, 0, leading, ks, 0, leading) || qs[n - 1] != ks[n - 1]) {
            throw rejected("q and k need one dtype and device, equal leading sizes (with enable_gqa, query heads a multiple of key"
                + " heads) and head dimension", q, k, v);
        }
        int world = ring.group().getWorldSize();
        int rank = ring.group().getRank();
        if (blocks.keyOffsets.length != world || blocks.keyLengths[rank] != ks[n - 2]) {
            throw rejected("blocks " + blocks + " must give one key block per rank of " + world + " and this rank's length "
                + ks[n - 2], q, k, v);
        }
        if (mask != null) {
            checkMask(q, mask, blocks, qs);
        }
        // v against k is checked by RingP2PComm.begin, still before anything moves.
    }

    private void checkMask(Tensor q, Tensor mask, Blocks blocks, long[] qs) {
        ScalarType type = mask.isNull() || !mask.defined() ? null : TorchTensors.dtype(mask);
        if (type == null || type != ScalarType.Bool && type != ScalarType.Float && type != TorchTensors.dtype(q)) {
            throw new IllegalArgumentException(where() + ": attn_mask must be boolean, float or the query's dtype, got "
                + TorchTensors.describe(mask));
        }
        long[] ms = TorchTensors.shape(mask);
        long[] scores = qs.clone();
        scores[scores.length - 1] = blocks.keyTotal();
        boolean fits = ms.length <= scores.length && TorchTensors.device(mask).equals(TorchTensors.device(q));
        for (int i = 1; fits && i <= ms.length; i++) {
            long m = ms[ms.length - i];
            fits = m == 1 || m == scores[scores.length - i];
        }
        if (!fits) {
            throw new IllegalArgumentException(where() + ": attn_mask " + TorchTensors.describe(mask) + " does not broadcast to this rank's"
                + " scores " + Arrays.toString(scores) + " on the query's device");
        }
    }

    private String where() {
        return "RingAttention.forward (rank " + ring.group().getRank() + " of " + ring.group().getWorldSize() + ")";
    }

    private IllegalArgumentException rejected(String what, Tensor q, Tensor k, Tensor v) {
        return new IllegalArgumentException(where() + ": " + what + ", got q " + TorchTensors.describe(q) + ", k " + TorchTensors.describe(k)
            + ", v " + TorchTensors.describe(v));
    }
}
