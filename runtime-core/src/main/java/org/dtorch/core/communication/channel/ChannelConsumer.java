package org.dtorch.core.communication.channel;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Device;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One consumer rank of a {@link WorkerTensorChannel}: takes refs (from its queue, {@link #receive()}, or by hand),
 * copies their tensors out of shared memory ({@link #resolve}) or drops them ({@link #discard}), and acknowledges
 * each so the producer may reuse the slot. Refs are taken in the producer's order: every ref, resolved or discarded,
 * exactly once. Profile regions are mapped once and kept until {@link #close()}.
 *
 * <p>Not thread-safe: one thread per consumer rank.
 */
public final class ChannelConsumer implements AutoCloseable {
    private final ChannelControl control;
    private final int rank;
    private final OneToOneRingBuffer queue;
    private final Map<Integer, ChannelSlots> profiles = new HashMap<>();
    private long expected = 1;
    private boolean closed;

    private ChannelConsumer(ChannelControl control, int rank) {
        this.control = control;
        this.rank = rank;
        this.queue = control.queue(rank);
    }

    static ChannelConsumer attach(ChannelOptions options, int rank) {
        ChannelControl control = ChannelControl.attach(options);
        try {
            control.checkOpen("attaching consumer rank " + rank);
            control.attachConsumer(rank);
            return new ChannelConsumer(control, rank);
        } catch (RuntimeException e) {
            control.close();
            throw e;
        }
    }

    /** This consumer's rank. */
    public int rank() {
        return rank;
    }

    /**
     * The next ref the producer enqueued for this rank, waiting up to the channel's timeout.
     *
     * @throws CommException if the queue is empty and the producer detached (nothing else changes), or the deadline
     *                       passes or the producer exited without closing (the channel is then failed), or the
     *                       channel failed or closed
     */
    public WorkerTensorRef receive() {
        checkUsable("receive");
        Deadline deadline = Deadline.after(control.options().timeout());
        byte[][] message = new byte[1][];
        while (true) {
            int seen = control.refCounter(rank);
            queue.read((type, buffer, index, length) -> {
                message[0] = new byte[length];
                buffer.getBytes(index, message[0]);
            }, 1);
            if (message[0] != null) {
                return WorkerTensorRef.fromBytes(message[0]);
            }
            control.checkOpen("receive on consumer rank " + rank);
            String what = control.label() + ": consumer rank " + rank + " waited for ref #" + expected;
            if (control.producerDetached()) {
                // A producer that closed after its last ref is the normal end, not a failure of the channel.
                throw new CommException(what + ": the producer detached; no more refs will come");
            }
            String gone = control.producerGone();
            if (gone != null) {
                throw control.fail(what + ": " + gone, false);
            }
            if (deadline.expired()) {
                throw control.fail(what + ": " + deadline.timedOutAfter(), true);
            }
            control.awaitRefSignal(rank, seen, deadline);
        }
    }

    /**
     * The published structure with fresh tensors (on the published tensor's device: the CPU, or the CUDA device of the
     * same index in this process) holding this rank's part of each leaf (one tensor per distinct
     * leaf, in every place it appeared), acknowledged to the producer.
     *
     * @throws IllegalArgumentException if {@code ref} belongs to another channel
     * @throws IllegalStateException    if {@code ref} is not the next in the producer's order (nothing is acknowledged)
     */
    public Object resolve(WorkerTensorRef ref) {
        checkNext(ref, "resolve");
        List<Tensor> leaves = new ArrayList<>();
        for (WorkerTensorRef.Leaf leaf : ref.leaves()) {
            if (leaf.profile() == WorkerTensorRef.Leaf.FALLBACK) {
                Tensor host = FallbackRegions.take(leaf, rank, control.layout().consumers(), true);
                if (leaf.device() < 0) {
                    leaves.add(host);
                } else {
                    try (host) {
                        leaves.add(TorchTensors.to(host, Device.cuda(leaf.device())));
                    }
                    WorkerTensorChannel.countDeviceCopy();
                }
            } else {
                leaves.add(slots(leaf).copyOut(leaf, rank, control.layout().consumers()));
                control.putAck(leaf.profile(), leaf.slot(), rank, leaf.generation());
            }
        }
        expected++;
        return ChannelStructure.rebuild(ref.skeleton(), leaves);
    }

    /**
     * Drops {@code refs} (in the producer's order, from the next expected one) without copying, acknowledging each
     * slot as discarded. Synchronous: the producer may reuse the slots when this returns, and no copy is waited for.
     *
     * @throws IllegalStateException if the refs are not the next ones in order (those before the first misfit are
     *                               discarded)
     */
    public void discard(List<WorkerTensorRef> refs) {
        for (WorkerTensorRef ref : refs) {
            checkNext(ref, "discard");
            for (WorkerTensorRef.Leaf leaf : ref.leaves()) {
                if (leaf.profile() == WorkerTensorRef.Leaf.FALLBACK) {
                    FallbackRegions.take(leaf, rank, control.layout().consumers(), false);
                } else {
                    control.putAck(leaf.profile(), leaf.slot(), rank, -leaf.generation());
                }
            }
            expected++;
        }
    }

    private void checkNext(WorkerTensorRef ref, String operation) {
        checkUsable(operation);
        if (!ref.channel().equals(control.options().name())) {
            throw new IllegalArgumentException(control.label() + ": " + operation + " of " + ref + ", a ref of another channel");
        }
        if (ref.sequence() != expected) {
            throw new IllegalStateException(control.label() + ": consumer rank " + rank + " takes refs in the producer's order; "
                + operation + " of ref #" + ref.sequence() + " while #" + expected + " is next");
        }
        control.checkOpen(operation + " on consumer rank " + rank);
    }

    private ChannelSlots slots(WorkerTensorRef.Leaf leaf) {
        return profiles.computeIfAbsent(leaf.profile(),
            p -> leaf.device() >= 0 ? CudaChannelSlots.open(leaf, control, rank) : ShmChannelSlots.open(leaf.region()));
    }

    private void checkUsable(String operation) {
        if (closed) {
            throw new IllegalStateException(control.label() + ": " + operation + " on closed consumer rank " + rank);
        }
    }

    /**
     * Finishes this rank's device copies and unmaps its regions, then detaches it (a producer waiting for its ACK then
     * fails naming it, and no longer waits on its completion events). Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            ChannelSlots.closeAll(profiles.values());
        } finally {
            profiles.clear();
            control.detachConsumer(rank);
            control.close();
        }
    }
}
