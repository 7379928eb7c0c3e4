package org.dtorch.core.communication.group;

import java.util.Arrays;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Ulysses sequence parallelism's all-to-alls over one rank's {@link ThreadGroup} (the Ulysses group of a
 * {@link org.dtorch.core.distributed.ParallelConfig}): attention inputs sharded on the sequence with every head
 * become the whole sequence with this rank's share of the heads, and the attention output goes back.
 *
 * <pre>
 *   [B, S_local, H, D]  --ulyssesScatterHeads-->  [B, S_local * n, H / n, D]   (local attention)
 *   [B, S_local, H, D]  <--ulyssesGatherHeads---  [B, S_local * n, H / n, D]
 * </pre>
 *
 * <p>{@code n} is the group size; rank {@code r} holds sequence rows {@code [r * S_local, (r + 1) * S_local)}
 * and heads {@code [r * H / n, (r + 1) * H / n)}. Every rank's sequence shard has the same length (TeleFuser's
 * equal-split {@code all_to_all_single}). Each method checks the rank (4 dimensions, heads divisible by
 * {@code n}, gathered sequence divisible by {@code n}) before communicating and fails with an
 * {@link IllegalArgumentException} naming the method, the rank and the value; inputs are never modified.
 *
 * <p>The methods block: {@link ThreadGroup} has no asynchronous all-to-all to return a wait handle from.
 * {@link #scatterHeads(Tensor, Tensor, Tensor)} instead moves Q, K and V in one all-to-all, so the three are
 * in flight together as TeleFuser's submit-all-then-wait intends: one collective's latency instead of three, for
 * one extra copy.
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank of the group calls the same methods in
 * the same order with equal shapes (a mismatch is a deadlock the group's deadline turns into an error).
 */
public final class UlyssesComm {
    private final ThreadGroup group;

    /** The Ulysses all-to-alls of {@code group}'s rank; the group stays owned by the caller. */
    public UlyssesComm(ThreadGroup group) {
        this.group = Objects.requireNonNull(group, "group");
    }

    /** The group the all-to-alls run on. */
    public ThreadGroup group() {
        return group;
    }

    /** {@code [B, S_local, H, D] -> [B, S_local * n, H / n, D]}: gathers the sequence, scatters the heads. */
    public Tensor ulyssesScatterHeads(Tensor x) {
        checkLayout("ulyssesScatterHeads", x, 2, "heads");
        return group.allToAll(x, 1, 2, x.size(1) * group.getWorldSize());
    }

    /** {@code [B, S_global, H_local, D] -> [B, S_global / n, H_local * n, D]}: the inverse of {@link #ulyssesScatterHeads}. */
    public Tensor ulyssesGatherHeads(Tensor x) {
        checkLayout("ulyssesGatherHeads", x, 1, "gathered sequence length");
        return group.allToAll(x, 2, 1, x.size(2) * group.getWorldSize());
    }

    /**
     * {@link #ulyssesScatterHeads} of Q, K and V in one all-to-all: they are concatenated on the batch into one
     * {@code [3 * B, S_local, H, D]} tensor, exchanged once and returned as views of the result: one
     * collective's latency for an extra copy of the three, which wins where latency dominates (small tensors) and
     * loses where the copy does. The three must have equal shapes and dtypes.
     */
    public HeadShards scatterHeads(Tensor q, Tensor k, Tensor v) {
        String op = "scatterHeads";
        checkLayout(op, q, 2, "heads");
        for (Tensor other : new Tensor[] {k, v}) {
            if (other == null || other.isNull() || !other.defined() || TorchTensors.dtype(other) != TorchTensors.dtype(q)
                || !Arrays.equals(TorchTensors.shape(other), TorchTensors.shape(q))) {
                throw new IllegalArgumentException(where(op) + ": q, k and v need equal shapes and dtypes, got q "
                    + TorchTensors.describe(q) + ", k " + TorchTensors.describe(k) + ", v " + TorchTensors.describe(v));
            }
        }
        long batch = q.size(0);
        try (TensorVector parts = new TensorVector(q, k, v); TensorArrayRef ref = new TensorArrayRef(parts);
             Tensor packed = torch.cat(ref, 0); Tensor exchanged = ulyssesScatterHeads(packed)) {
            return new HeadShards(exchanged.narrow(0, 0, batch), exchanged.narrow(0, batch, batch), exchanged.narrow(0, 2 * batch, batch));
        }
    }

    /**
     * Q, K and V after {@link #scatterHeads}: each {@code [B, S_local * n, H / n, D]}, views of one allocation
     * that lives while any of them does.
     *
     * @param q the queries
     * @param k the keys
     * @param v the values
     */
    public record HeadShards(Tensor q, Tensor k, Tensor v) implements AutoCloseable {
        /** Releases the three views. */
        @Override
        public void close() {
            q.close();
            k.close();
            v.close();
        }
    }

    /** Checks a 4-dimensional input whose dimension {@code dividedDim} splits evenly over the group. */
    private void checkLayout(String op, Tensor x, int dividedDim, String what) {
        if (x == null || x.isNull() || !x.defined() || x.dim() != 4) {
            throw new IllegalArgumentException(where(op) + ": input must be [B, S, H, D], got " + TorchTensors.describe(x));
        }
        int n = group.getWorldSize();
        if (x.size(dividedDim) % n != 0) {
            throw new IllegalArgumentException(where(op) + ": the " + what + " (" + x.size(dividedDim) + ", dim " + dividedDim + " of "
                + Arrays.toString(TorchTensors.shape(x)) + ") must be divisible by the Ulysses group size " + n);
        }
    }

    private String where(String op) {
        return "UlyssesComm." + op + " (rank " + group.getRank() + " of " + group.getWorldSize() + ")";
    }
}
