package org.dtorch.core.communication.group;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Ring attention's K/V rotation over one rank's {@link ThreadGroup} (the ring group of a
 * {@link org.dtorch.core.distributed.ParallelConfig}): every step, each rank sends the block it holds to the next rank
 * and receives the previous rank's, so after {@code n - 1} steps every rank has seen every rank's block.
 *
 * <pre>
 *   begin(k, v)   buffer 0 = [ k flattened | v flattened ]          block of this rank
 *   submitNext()  isend(buffer 0 -> rank + 1), irecv(buffer 1 <- rank - 1)   one batch, in flight
 *   awaitNext()   waits for it; buffer 1 holds the block of rank - 1         (then 1 -> 0, and so on)
 * </pre>
 *
 * <p>K and V travel as one packed transfer in two receive buffers allocated once and reused across steps and calls
 * (while shapes, dtype and device stay the same); the returned blocks are views of them. The next block is submitted
 * before the current block is used, so the transfer overlaps the caller's compute: the current buffer is only read
 * while it is being sent, and is written again only after the batch that sent it has been awaited. Every wait is
 * bounded by the group's timeout.
 *
 * <p>Not thread-safe: one thread per rank, as its group; every rank of the group calls the same methods in the same
 * order with equal shapes (a mismatch is a deadlock the group's deadline turns into an error naming the batch).
 */
public final class RingP2PComm implements AutoCloseable {
    private final ThreadGroup group;
    private final Tensor[] buffers = new Tensor[2];
    private long[] kShape;
    private long[] vShape;
    private int current;
    private P2PWork inFlight;

    /** The ring of {@code group}'s ranks in group order; the group stays owned by the caller. */
    public RingP2PComm(ThreadGroup group) {
        this.group = Objects.requireNonNull(group, "group");
    }

    /** The group the blocks rotate in. */
    public ThreadGroup group() {
        return group;
    }

    /** The group-local rank blocks are sent to. */
    public int nextRank() {
        return (group.getRank() + 1) % group.getWorldSize();
    }

    /** The group-local rank blocks are received from. */
    public int prevRank() {
        return (group.getRank() + group.getWorldSize() - 1) % group.getWorldSize();
    }

    /**
     * Starts a rotation with this rank's {@code k} and {@code v}: copies them into the first buffer and returns them as
     * its views. {@code k} and {@code v} need the same dtype, device and number of dimensions, and equal sizes but for
     * the last; checked before anything moves. Inputs are not modified.
     *
     * @throws IllegalArgumentException naming the rank and the offending tensors
     * @throws IllegalStateException    if a transfer of the previous rotation was never awaited
     */
    public KvBlock begin(Tensor k, Tensor v) {
        checkIdle("begin");
        checkPair(k, v);
        return begin(k, v, k.dim() < 2 ? -1 : k.size(-2));
    }

    /**
     * {@link #begin(Tensor, Tensor)} for blocks of different lengths along dimension {@code -2} (a sequence that does
     * not divide evenly over the ring, empty blocks included): every block travels as {@code rows} rows, the longest
     * block's length on every rank; {@code k} and {@code v} fill the first of them and the rest is never read, so the
     * receiver narrows each block to its sender's length.
     *
     * @throws IllegalArgumentException naming the rank and the offending tensors, or {@code rows} shorter than {@code k}
     * @throws IllegalStateException    if a transfer of the previous rotation was never awaited
     */
    public KvBlock begin(Tensor k, Tensor v, long rows) {
        checkIdle("begin");
        checkPair(k, v);
        long[] ks = TorchTensors.shape(k);
        long[] vs = TorchTensors.shape(v);
        if (rows >= 0 && (ks.length < 2 || rows < ks[ks.length - 2])) {
            throw new IllegalArgumentException(where("begin") + ": blocks of " + rows + " rows cannot hold k " + TorchTensors.describe(k));
        }
        long held = rows < 0 ? -1 : ks[ks.length - 2];
        if (rows >= 0) {
            ks[ks.length - 2] = rows;
            vs[vs.length - 2] = rows;
        }
        long total = Arrays.stream(ks).reduce(1, Math::multiplyExact) + Arrays.stream(vs).reduce(1, Math::multiplyExact);
        if (buffers[0] == null || buffers[0].numel() != total || TorchTensors.dtype(buffers[0]) != TorchTensors.dtype(k)
            || !TorchTensors.device(buffers[0]).equals(TorchTensors.device(k))) {
            releaseBuffers();
            try (TensorOptions options = TorchTensors.options(TorchTensors.dtype(k), TorchTensors.device(k))) {
                for (int i = 0; i < 2; i++) {
                    buffers[i] = torch.empty(new long[] {total}, options, new MemoryFormatOptional());
                }
            }
        }
        kShape = ks;
        vShape = vs;
        current = 0;
        KvBlock block = block(0);
        if (held < 0 || held == rows) {
            block.k().copy_(k);
            block.v().copy_(v);
        } else {
            try (Tensor kRows = block.k().narrow(-2, 0, held); Tensor vRows = block.v().narrow(-2, 0, held)) {
                kRows.copy_(k);
                vRows.copy_(v);
            }
        }
        return block;
    }

    /**
     * Sends the current block to {@link #nextRank()} and receives the previous rank's into the other buffer, in one
     * {@link ThreadGroup#batchIsendIrecv} batch; returns at once. The current block stays readable meanwhile.
     *
     * @throws IllegalStateException before {@link #begin}, with a batch already in flight, or in a group of one rank
     */
    public void submitNext() {
        checkIdle("submitNext");
        if (kShape == null) {
            throw new IllegalStateException(where("submitNext") + ": no rotation begun");
        }
        if (group.getWorldSize() == 1) {
            throw new IllegalStateException(where("submitNext") + ": a ring of one rank has nothing to rotate");
        }
        inFlight = group.batchIsendIrecv(List.of(P2POp.isend(buffers[current], nextRank()),
            P2POp.irecv(buffers[1 - current], prevRank())));
    }

    /**
     * Waits, within the group's timeout, for the batch of {@link #submitNext()} and returns the received block: the
     * block that was {@code steps} ranks back after {@code steps} rotations. It stays valid until the second
     * {@link #submitNext()} after this call, which receives into its buffer again.
     *
     * @throws IllegalStateException if nothing is in flight
     */
    public KvBlock awaitNext() {
        if (inFlight == null) {
            throw new IllegalStateException(where("awaitNext") + ": nothing submitted");
        }
        P2PWork work = inFlight;
        inFlight = null;
        work.await();
        current = 1 - current;
        return block(current);
    }

    /** Releases the receive buffers; blocks already returned keep their storage alive until closed. Idempotent. */
    @Override
    public void close() {
        releaseBuffers();
        kShape = null;
        vShape = null;
    }

    /**
     * One rank's keys and values: views of a receive buffer of {@link RingP2PComm}.
     *
     * @param k the keys, in the shape given to {@link #begin}
     * @param v the values, in the shape given to {@link #begin}
     */
    public record KvBlock(Tensor k, Tensor v) implements AutoCloseable {
        /** Releases the two views. */
        @Override
        public void close() {
            k.close();
            v.close();
        }
    }

    private KvBlock block(int index) {
        Tensor packed = buffers[index];
        long kn = Arrays.stream(kShape).reduce(1, Math::multiplyExact);
        try (Tensor kFlat = packed.narrow(0, 0, kn); Tensor vFlat = packed.narrow(0, kn, packed.numel() - kn)) {
            return new KvBlock(kFlat.view(kShape), vFlat.view(vShape));
        }
    }

    private void checkIdle(String op) {
        if (inFlight != null) {
            throw new IllegalStateException(where(op) + ": the submitted block was not awaited");
        }
    }

    private void checkPair(Tensor k, Tensor v) {
        for (Tensor t : new Tensor[] {k, v}) {
            if (t == null || t.isNull() || !t.defined() || t.dim() < 1) {
                throw new IllegalArgumentException(where("begin") + ": k and v must be defined tensors of at least one dimension, got k "
                    + TorchTensors.describe(k) + ", v " + TorchTensors.describe(v));
            }
        }
        long[] ks = TorchTensors.shape(k);
        long[] vs = TorchTensors.shape(v);
        if (TorchTensors.dtype(k) != TorchTensors.dtype(v) || !TorchTensors.device(k).equals(TorchTensors.device(v))
            || ks.length != vs.length || !Arrays.equals(ks, 0, ks.length - 1, vs, 0, vs.length - 1)) {
            throw new IllegalArgumentException(where("begin") + ": k and v need one dtype and device and equal sizes but for the last,"
                + " got k " + TorchTensors.describe(k) + ", v " + TorchTensors.describe(v));
        }
    }

    private void releaseBuffers() {
        for (int i = 0; i < 2; i++) {
            if (buffers[i] != null) {
                buffers[i].close();
                buffers[i] = null;
            }
        }
    }

    private String where(String op) {
        return "RingP2PComm." + op + " (rank " + group.getRank() + " of " + group.getWorldSize() + ")";
    }
}
