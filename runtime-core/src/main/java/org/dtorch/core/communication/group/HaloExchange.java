package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The neighbour halo exchange of height-sharded tensors over one rank's {@link ThreadGroup} (TeleFuser's spatial VAE
 * communication): before a spatial convolution, each rank gets {@code h} rows from the rank above and {@code h} from the
 * rank below, so the convolution runs on its shard alone with no padding in height.
 *
 * <pre>
 *   rank r - 1   [ ...           | last h rows  ]  --\
 *   rank r       [ first h rows  | ...  | last h ]     |-->  [ halo up | local | halo down ]   [N, C, H_r + 2h, W]
 *   rank r + 1   [ first h rows  | ...          ]  --/
 * </pre>
 *
 * <p>Tensors are {@code [N, C, H_r, W]}, height on dim 2, ranks in order from top to bottom; the shards follow the
 * balanced split of the global height ({@link BalancedSplit}), which every rank passes, so every rank checks every
 * rank's height before communicating. Rank 0's upper halo and the last rank's lower halo are zeros (the zero padding of
 * the whole tensor). One {@link ThreadGroup#batchIsendIrecv} per call carries the sends and receives of the
 * neighbours this rank has; send and receive buffers are kept and reused while calls keep the same shape, dtype and
 * halo. The result has the input's memory format (channels-last or contiguous).
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank of the group calls {@link #exchange} in the same
 * order with the same global height, halo, dtype and {@code N, C, W} (a mismatch of those is not detected before
 * communicating: it fails in the backend or is a deadlock the group's deadline turns into an error).
 */
public final class HaloExchange implements AutoCloseable {
    private final ThreadGroup group;
    /** Contiguous {@code [N, C, h, W]} buffers: sent up, sent down, received from up, received from down. */
    private Tensor sendUp;
    private Tensor sendDown;
    private Tensor recvUp;
    private Tensor recvDown;
    private long allocations;

    /** The halo exchange of {@code group}'s rank; the group stays owned by the caller. */
    public HaloExchange(ThreadGroup group) {
        this.group = Objects.requireNonNull(group, "group");
    }

    /** The group the exchange runs on. */
    public ThreadGroup group() {
        return group;
    }

    /**
     * {@code local} ({@code [N, C, H_r, W]}, this rank's balanced share of {@code height} rows) padded with {@code halo}
     * rows of each neighbour: a new {@code [N, C, H_r + 2 * halo, W]} tensor in {@code local}'s memory format, zero rows
     * where there is no neighbour. Blocks until the halos have arrived, within the group's timeout.
     *
     * @throws IllegalArgumentException before communicating: {@code local} not 4-dimensional or its height not this
     *                                  rank's share; and on every rank alike, {@code height} shorter than the group, a
     *                                  negative halo or a halo larger than the height of some rank
     */
    public Tensor exchange(Tensor local, long height, int halo) {
        check(local, height, halo);
        long rows = local.size(2);
        long[] padded = TorchTensors.shape(local);
        padded[2] = rows + 2L * halo;
        Tensor out = torch.empty(padded, local.options(), new MemoryFormatOptional(local.suggest_memory_format()));
        try (Tensor middle = out.narrow(2, halo, rows)) {
            middle.copy_(local);
            if (halo > 0) {
                fillHalos(local, out, halo);
            }
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        return out;
    }

    /** Number of times the buffers were allocated, for tests of their reuse. */
    long allocations() {
        return allocations;
    }

    /** Releases the buffers; the exchange allocates them again if used later. Idempotent. */
    @Override
    public void close() {
        for (Tensor t : new Tensor[] {sendUp, sendDown, recvUp, recvDown}) {
            if (t != null) {
                t.close();
            }
        }
        sendUp = sendDown = recvUp = recvDown = null;
    }

    private void fillHalos(Tensor local, Tensor out, int halo) {
        int rank = group.getRank();
        boolean up = rank > 0;
        boolean down = rank < group.getWorldSize() - 1;
        long rows = local.size(2);
        List<P2POp> ops = new ArrayList<>(4);
        if (up || down) {
            ensureBuffers(local, halo);
        }
        if (up) {
            try (Tensor first = local.narrow(2, 0, halo)) {
                sendUp.copy_(first);
            }
            ops.add(P2POp.isend(sendUp, rank - 1));
            ops.add(P2POp.irecv(recvUp, rank - 1));
        }
        if (down) {
            try (Tensor last = local.narrow(2, rows - halo, halo)) {
                sendDown.copy_(last);
            }
            ops.add(P2POp.isend(sendDown, rank + 1));
            ops.add(P2POp.irecv(recvDown, rank + 1));
        }
        if (!ops.isEmpty()) {
            group.batchIsendIrecv(ops).await();
        }
        try (Tensor top = out.narrow(2, 0, halo); Tensor bottom = out.narrow(2, rows + halo, halo)) {
            if (up) {
                top.copy_(recvUp);
            } else {
                top.zero_();
            }
            if (down) {
                bottom.copy_(recvDown);
            } else {
                bottom.zero_();
            }
        }
    }

    /** Keeps the buffers when they fit {@code [N, C, halo, W]} of {@code local}'s dtype and device, else replaces them. */
    private void ensureBuffers(Tensor local, int halo) {
        long[] shape = TorchTensors.shape(local);
        shape[2] = halo;
        if (sendUp != null && Arrays.equals(TorchTensors.shape(sendUp), shape) && TorchTensors.dtype(sendUp) == TorchTensors.dtype(local)
            && TorchTensors.device(sendUp).equals(TorchTensors.device(local))) {
            return;
        }
        close();
        MemoryFormatOptional contiguous = new MemoryFormatOptional(torch.MemoryFormat.Contiguous);
        sendUp = torch.empty(shape, local.options(), contiguous);
        sendDown = torch.empty(shape, local.options(), contiguous);
        recvUp = torch.empty(shape, local.options(), contiguous);
        recvDown = torch.empty(shape, local.options(), contiguous);
        allocations++;
    }

    private void check(Tensor local, long height, int halo) {
        if (local == null || local.isNull() || !local.defined() || local.dim() != 4) {
            throw new IllegalArgumentException(where() + ": input must be [N, C, H, W], got " + TorchTensors.describe(local));
        }
        int n = group.getWorldSize();
        if (height < n) {
            throw new IllegalArgumentException(where() + ": the height " + height + " is shorter than the " + n
                + " ranks of the group; every rank needs at least one row");
        }
        long[] shares = BalancedSplit.sizes(height, n);
        int rank = group.getRank();
        if (local.size(2) != shares[rank]) {
            throw new IllegalArgumentException(where() + ": input " + TorchTensors.describe(local) + " has " + local.size(2)
                + " rows, but rank " + rank + "'s balanced share of the height " + height + " is " + shares[rank]
                + " (shares: " + Arrays.toString(shares) + ")");
        }
        if (halo < 0) {
            throw new IllegalArgumentException(where() + ": the halo must be non-negative, got " + halo);
        }
        // Every rank is a neighbour of another, so the halo must fit the smallest share.
        long smallest = shares[n - 1];
        if (n > 1 && halo > smallest) {
            throw new IllegalArgumentException(where() + ": the halo " + halo + " is larger than the " + smallest
                + " rows of the smallest rank (shares of the height " + height + ": " + Arrays.toString(shares) + ")");
        }
    }

    private String where() {
        return "HaloExchange.exchange (rank " + group.getRank() + " of " + group.getWorldSize() + ")";
    }
}
