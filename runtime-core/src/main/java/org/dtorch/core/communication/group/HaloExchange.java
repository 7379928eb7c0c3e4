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
 * The halo exchange of height-sharded tensors over one rank's {@link ThreadGroup} (TeleFuser's spatial VAE
 * communication): before a spatial convolution, each rank gets the {@code h} rows above its own and the {@code h} rows
 * below, so the convolution runs on its shard alone with no padding in height.
 *
 * <pre>
 *   rank r - 1   [ ...           | last h rows  ]  --\
 *   rank r       [ first h rows  | ...  | last h ]     |-->  [ halo up | local | halo down ]   [N, C, H_r + 2h, W]
 *   rank r + 1   [ first h rows  | ...          ]  --/
 * </pre>
 *
 * <p>Tensors are {@code [N, C, H_r, W]}, height on dim 2, ranks in order from top to bottom; the shards follow the
 * balanced split of the global height ({@link BalancedSplit}), which every rank passes, so every rank checks its height
 * before communicating and knows every rank's rows. The halo rows come from whichever ranks hold them: usually the two
 * neighbours, but a halo taller than a neighbour's share reaches past it, and ranks with an empty share (a height
 * shorter than the group) are passed over. Rows above the first and below the last row of the whole tensor are zeros
 * (its zero padding). One {@link ThreadGroup#batchIsendIrecv} per call carries every send and receive this rank has;
 * send and receive buffers are kept and reused while calls keep the same shape, height, dtype and halo. The result has
 * the input's memory format (channels-last or contiguous).
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank of the group calls {@link #exchange} in the same
 * order with the same global height, halo, dtype and {@code N, C, W} (a mismatch of those is not detected before
 * communicating: it fails in the backend or is a deadlock the group's deadline turns into an error).
 */
public final class HaloExchange implements AutoCloseable {
    private final ThreadGroup group;
    /** What the buffers were made for: {@code local}'s shape, the height and the halo; null when there are none. */
    private long[] bufferKey;
    /** One contiguous {@code [N, C, rows, W]} buffer per piece of the plan: sent or received, in plan order. */
    private List<Tensor> buffers = List.of();
    private long allocations;

    /**
     * Rows {@code [first, first + rows)} of the whole tensor that travel from rank {@code from} to rank {@code to}.
     *
     * @param from  the rank that holds the rows
     * @param to    the rank whose halo they are
     * @param first the first global row
     * @param rows  how many rows (at least one)
     */
    private record Piece(int from, int to, long first, long rows) {
    }

    /** The halo exchange of {@code group}'s rank; the group stays owned by the caller. */
    public HaloExchange(ThreadGroup group) {
        this.group = Objects.requireNonNull(group, "group");
    }

    /** The group the exchange runs on. */
    public ThreadGroup group() {
        return group;
    }

    /**
     * {@code local} ({@code [N, C, H_r, W]}, this rank's balanced share of {@code height} rows, possibly none) padded
     * with the {@code halo} rows above and below it: a new {@code [N, C, H_r + 2 * halo, W]} tensor in {@code local}'s
     * memory format, zero rows beyond the whole tensor's first and last rows. Blocks until the halos have arrived,
     * within the group's timeout.
     *
     * @throws IllegalArgumentException before communicating: {@code local} not 4-dimensional or its height not this
     *                                  rank's share, or a negative halo
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
                fillHalos(local, out, height, halo);
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
        buffers.forEach(Tensor::close);
        buffers = List.of();
        bufferKey = null;
    }

    /**
     * Every piece of every rank's halo, in one order all ranks agree on (by receiving rank, then sending rank): rank
     * {@code q} needs the rows {@code [offset_q - halo, offset_q)} and {@code [end_q, end_q + halo)} that exist, and each
     * other rank sends what it holds of them. A rank's rows lie wholly above or below another's, so each pair of ranks
     * shares at most one piece.
     */
    private static List<Piece> plan(long height, int world, int halo) {
        long[] offsets = BalancedSplit.offsets(height, world);
        long[] shares = BalancedSplit.sizes(height, world);
        List<Piece> pieces = new ArrayList<>();
        for (int q = 0; q < world; q++) {
            long windowStart = Math.max(0, offsets[q] - halo);
            long windowEnd = Math.min(height, offsets[q] + shares[q] + halo);
            for (int s = 0; s < world; s++) {
                if (s == q) {
                    continue;
                }
                long first = Math.max(windowStart, offsets[s]);
                long end = Math.min(windowEnd, offsets[s] + shares[s]);
                if (end > first) {
                    pieces.add(new Piece(s, q, first, end - first));
                }
            }
        }
        return pieces;
    }

    private void fillHalos(Tensor local, Tensor out, long height, int halo) {
        int rank = group.getRank();
        long offset = BalancedSplit.offset(height, group.getWorldSize(), rank);
        long rows = local.size(2);
        List<Piece> mine = plan(height, group.getWorldSize(), halo).stream().filter(p -> p.from() == rank || p.to() == rank).toList();
        ensureBuffers(local, mine, height, halo);
        List<P2POp> ops = new ArrayList<>(mine.size());
        for (int i = 0; i < mine.size(); i++) {
            Piece piece = mine.get(i);
            if (piece.from() == rank) {
                try (Tensor rowsOfMine = local.narrow(2, piece.first() - offset, piece.rows())) {
                    buffers.get(i).copy_(rowsOfMine);
                }
                ops.add(P2POp.isend(buffers.get(i), piece.to()));
            } else {
                ops.add(P2POp.irecv(buffers.get(i), piece.from()));
            }
        }
        if (!ops.isEmpty()) {
            group.batchIsendIrecv(ops).await();
        }
        // Out's row i is global row offset - halo + i; rows outside the whole tensor are its zero padding.
        long top = offset - halo;
        try (Tensor above = out.narrow(2, 0, halo); Tensor below = out.narrow(2, halo + rows, halo)) {
            above.zero_();
            below.zero_();
        }
        for (int i = 0; i < mine.size(); i++) {
            Piece piece = mine.get(i);
            if (piece.to() == rank) {
                try (Tensor into = out.narrow(2, piece.first() - top, piece.rows())) {
                    into.copy_(buffers.get(i));
                }
            }
        }
    }

    /** Keeps the buffers when they were made for {@code local}'s shape, dtype and device, the height and the halo; else replaces them. */
    private void ensureBuffers(Tensor local, List<Piece> pieces, long height, int halo) {
        long[] shape = TorchTensors.shape(local);
        long[] key = new long[shape.length + 2];
        System.arraycopy(shape, 0, key, 0, shape.length);
        key[shape.length] = height;
        key[shape.length + 1] = halo;
        if (bufferKey != null && Arrays.equals(bufferKey, key) && (buffers.isEmpty()
            || TorchTensors.dtype(buffers.getFirst()) == TorchTensors.dtype(local)
            && TorchTensors.device(buffers.getFirst()).equals(TorchTensors.device(local)))) {
            return;
        }
        close();
        if (pieces.isEmpty()) {
            bufferKey = key;
            return;
        }
        MemoryFormatOptional contiguous = new MemoryFormatOptional(torch.MemoryFormat.Contiguous);
        List<Tensor> made = new ArrayList<>(pieces.size());
        for (Piece piece : pieces) {
            long[] pieceShape = shape.clone();
            pieceShape[2] = piece.rows();
            made.add(torch.empty(pieceShape, local.options(), contiguous));
        }
        buffers = made;
        bufferKey = key;
        allocations++;
    }

    private void check(Tensor local, long height, int halo) {
        if (local == null || local.isNull() || !local.defined() || local.dim() != 4) {
            throw new IllegalArgumentException(where() + ": input must be [N, C, H, W], got " + TorchTensors.describe(local));
        }
        if (height < 0) {
            throw new IllegalArgumentException(where() + ": the height must be non-negative, got " + height);
        }
        int n = group.getWorldSize();
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
    }

    private String where() {
        return "HaloExchange.exchange (rank " + group.getRank() + " of " + group.getWorldSize() + ")";
    }
}
