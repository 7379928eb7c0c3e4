package org.dtorch.core.communication.channel;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;
import org.agrona.BitUtil;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A CUDA profile's two slots in one persistent device allocation, lent through CUDA IPC once
 * ({@link CudaIpcTensors#lend}) and viewed by each consumer process once (the allocation is opened once per process
 * and cached there). The stream-ordered protocol, per slot, with no host wait and no device-wide synchronization on
 * the hot path:
 * <ol>
 *   <li>the producer's current stream waits on the completion event of every consumer rank whose ACK of the slot's
 *       previous generation is positive (it copied), only if that event has not completed; a rank that discarded
 *       (negative ACK) recorded nothing and is never waited for;</li>
 *   <li>the producer copies the source into the slot on that stream and records the slot's reusable ready event;</li>
 *   <li>a consumer's current stream waits on the ready event only if it has not completed, and copies out;</li>
 *   <li>the consumer records its reusable completion event for (profile, slot, rank) on that stream; the caller then
 *       publishes the ACK at once.</li>
 * </ol>
 * A consumer's completion event comes from its process's pool of interprocess events, which are never destroyed
 * while the process lives, so the producer can never wait on a destroyed event; its handle is written once into the
 * control region ({@link ChannelControl#putEventHandle}) before the rank's first positive ACK of the slot, and the
 * producer opens it once and keeps it. Close finishes this side's device work before it releases anything: a
 * consumer synchronizes its completion events; the producer waits (up to the channel's timeout) for the ACKs of
 * each slot's last generation from every consumer still attached, synchronizes their completion events and its ready
 * events, and only then gives the pool back. A leaf's handles:
 *
 * <pre>
 *  offset                    size                           field
 *  0                         CudaIpcDescriptor.SIZE         the pool allocation's descriptor
 *  CudaIpcDescriptor.SIZE    DeviceEvent.IPC_HANDLE_BYTES   the slot's ready event
 * </pre>
 *
 * <p>Not thread-safe: one producer thread or one consumer thread per instance.
 */
final class CudaChannelSlots implements ChannelSlots {
    private static final int HANDLES = CudaIpcDescriptor.SIZE + DeviceEvent.IPC_HANDLE_BYTES;
    private static final MemoryFormatOptional NO_MEMORY_FORMAT = new MemoryFormatOptional();

    private final String name;
    private final Device device;
    private final ChannelControl control;
    private final int profile;
    private final long stride;
    /** The pool's bytes: the producer's tensor, or a consumer's view of it. */
    private final Tensor pool;
    private final CudaIpcDescriptor lent;
    /** Producer only: the loan that keeps the pool exported, and each slot's ready event. */
    private final CudaIpcTensors.Loan loan;
    private final DeviceEvent[] ready;
    /** Producer only: the consumers' completion events, [slot][rank], opened when first needed. */
    private final DeviceEvent[][] consumerCopies;
    /** Producer only: the generation last staged in each slot (0: none). */
    private final long[] staged = new long[ChannelLayout.SLOTS];
    private long stages;
    /** Producer only: each slot's handles, built at its first publish (the descriptor and event handle never change). */
    private final byte[][] slotHandles = new byte[ChannelLayout.SLOTS][];
    /**
     * Each slot's bytes as a tensor of the profile's shape and dtype (fixed per profile), made at the slot's first use
     * on either side and closed with the pool, so the hot path builds no views.
     */
    private final Tensor[] slotViews = new Tensor[ChannelLayout.SLOTS];
    /** Consumer only: the options of its copies out (the profile's dtype on this device), made at the first copy. */
    private TensorOptions outOptions;
    /** Consumer only: its rank, the slots' ready events as opened here, and its own completion events. */
    private final int rank;
    private final DeviceEvent[] readyOpened = new DeviceEvent[ChannelLayout.SLOTS];
    private final DeviceEvent[] copied = new DeviceEvent[ChannelLayout.SLOTS];
    private boolean closed;

    private CudaChannelSlots(String name, Device device, ChannelControl control, int profile, long stride, Tensor pool,
                             CudaIpcDescriptor lent, CudaIpcTensors.Loan loan, DeviceEvent[] ready, int rank) {
        this.name = name;
        this.device = device;
        this.control = control;
        this.profile = profile;
        this.stride = stride;
        this.pool = pool;
        this.lent = lent;
        this.loan = loan;
        this.ready = ready;
        this.consumerCopies = loan == null ? null : new DeviceEvent[ChannelLayout.SLOTS][control.layout().consumers()];
        this.rank = rank;
    }

    /** Producer: allocates the pool of {@code profile} for two slots of {@code bytes} on {@code device} and lends it. */
    static CudaChannelSlots create(String name, Device device, long bytes, ChannelControl control, int profile) {
        long stride = Math.max(256, BitUtil.align(bytes, 256));
        DeviceEvent[] ready = new DeviceEvent[ChannelLayout.SLOTS];
        Tensor pool;
        try (TensorOptions options = TorchTensors.options(ScalarType.Byte, device)) {
            pool = torch.empty(new long[] {ChannelLayout.SLOTS * stride}, options, NO_MEMORY_FORMAT);
        }
        CudaIpcTensors.Loan loan = null;
        try {
            loan = CudaIpcTensors.lend(pool, DeviceStream.of(device));
            for (int s = 0; s < ready.length; s++) {
                ready[s] = DeviceEvent.createInterprocess(device);
            }
            return new CudaChannelSlots(name, device, control, profile, stride, pool, loan.descriptor(), loan, ready, -1);
        } catch (RuntimeException e) {
            Arrays.stream(ready).filter(r -> r != null).forEach(DeviceEvent::close);
            if (loan != null) {
                loan.close();
            }
            pool.close();
            throw e;
        }
    }

    /** Consumer {@code rank}: views the pool a leaf names. */
    static CudaChannelSlots open(WorkerTensorRef.Leaf leaf, ChannelControl control, int rank) {
        if (leaf.handles().length != HANDLES) {
            throw new IllegalArgumentException("a CUDA channel leaf carries " + HANDLES + " bytes of handles, got " + leaf.handles().length
                + ": " + leaf);
        }
        CudaIpcDescriptor lent;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment in = arena.allocate(CudaIpcDescriptor.SIZE);
            MemorySegment.copy(leaf.handles(), 0, in, ValueLayout.JAVA_BYTE, 0, CudaIpcDescriptor.SIZE);
            lent = CudaIpcDescriptor.readFrom(in, 0);
        }
        // The pool's own length is the producer's; the allocation's end bounds it from above.
        long[] shape = {lent.allocationSize() - lent.offset()};
        Tensor pool = CudaIpcTensors.view(lent, shape, ScalarType.Byte, null);
        return new CudaChannelSlots(leaf.region(), Device.cuda(lent.device()), control, leaf.profile(), 0, pool, lent, null, null, rank);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long slotOffset(int slot) {
        return slot * stride;
    }

    @Override
    public byte[] handles(int slot) {
        if (slotHandles[slot] != null) {
            return slotHandles[slot].clone(); // a ref's leaf is public: no caller may change the next ref's handles
        }
        byte[] out = new byte[HANDLES];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment descriptor = arena.allocate(CudaIpcDescriptor.SIZE);
            lent.writeTo(descriptor, 0);
            MemorySegment.copy(descriptor, ValueLayout.JAVA_BYTE, 0, out, 0, CudaIpcDescriptor.SIZE);
        }
        System.arraycopy(ready[slot].ipcHandle(), 0, out, CudaIpcDescriptor.SIZE, DeviceEvent.IPC_HANDLE_BYTES);
        slotHandles[slot] = out.clone();
        return out;
    }

    /** Producer: called once every rank acknowledged the slot's previous generation ({@link ChannelControl#awaitAcks}). */
    @Override
    public void stage(int slot, Tensor source) {
        long clock = ChannelPhases.start();
        DeviceStream stream = DeviceStream.of(device);
        for (int r = 0; r < consumerCopies[slot].length; r++) {
            DeviceEvent copy = consumerCopy(slot, r);
            // query() first: the liveness check reads /proc, and is only needed where the stream would wait.
            if (copy != null && !copy.query() && control.consumerGone(r) == null) {
                copy.streamWaitEvent(stream);
            }
        }
        clock = ChannelPhases.end(ChannelPhases.Phase.CONSUMER_EVENTS, clock);
        if (slotViews[slot] == null) {
            makeSlotView(slot, slotOffset(slot), TorchTensors.shape(source), TorchTensors.dtype(source));
        }
        slotViews[slot].copy_(source);
        WorkerTensorChannel.countDeviceCopy();
        clock = ChannelPhases.end(ChannelPhases.Phase.STAGE_COPY, clock);
        ready[slot].record(stream);
        ChannelPhases.end(ChannelPhases.Phase.READY_RECORD, clock);
        staged[slot] = ++stages;
    }

    /**
     * The completion event of rank {@code r}'s copy of {@code slot}'s previous generation, or null when there is
     * nothing to wait for: the slot was never staged, the rank discarded it (its event may never have been
     * recorded), or it detached (its close finished its copies). Whether its process exited is the caller's check,
     * made only where it would wait.
     */
    private DeviceEvent consumerCopy(int slot, int r) {
        long ack = control.ack(profile, slot, r);
        if (ack <= 0 || control.consumerPid(r) < 0) {
            return null;
        }
        if (consumerCopies[slot][r] == null) {
            if (control.consumerGone(r) != null) {
                return null; // its handle cannot be opened any more
            }
            byte[] handle = control.eventHandle(profile, slot, r);
            if (Arrays.equals(handle, new byte[handle.length])) {
                throw new IllegalStateException(control.label() + ": consumer rank " + r + " acknowledged generation " + ack
                    + " of profile " + profile + " slot " + slot + " as copied but published no completion event handle");
            }
            consumerCopies[slot][r] = DeviceEvent.openIpcCached(device, handle, control.consumerPid(r));
        }
        return consumerCopies[slot][r];
    }

    @Override
    public Tensor copyOut(WorkerTensorRef.Leaf leaf, int rank, int world) {
        int slot = leaf.slot();
        long clock = ChannelPhases.start();
        ScalarType dtype = TorchTensors.ofCode(leaf.dtype());
        DeviceStream stream = DeviceStream.of(device);
        if (readyOpened[slot] == null) {
            byte[] eventHandle = Arrays.copyOfRange(leaf.handles(), CudaIpcDescriptor.SIZE, HANDLES);
            readyOpened[slot] = DeviceEvent.openIpcCached(device, eventHandle, lent.producerPid());
        }
        if (!readyOpened[slot].query()) {
            readyOpened[slot].streamWaitEvent(stream);
        }
        clock = ChannelPhases.end(ChannelPhases.Phase.READY_WAIT, clock);
        if (outOptions == null) {
            outOptions = TorchTensors.options(dtype, device);
        }
        if (slotViews[slot] == null) {
            makeSlotView(slot, leaf.offset(), leaf.shape(), dtype);
        }
        Tensor out;
        try (Tensor part = ChannelSlots.rankShare(slotViews[slot], leaf, rank, world)) {
            out = torch.empty(leaf.shardDim() < 0 ? leaf.shape() : TorchTensors.shape(part), outOptions, NO_MEMORY_FORMAT);
            clock = ChannelPhases.end(ChannelPhases.Phase.EMPTY, clock);
            out.copy_(part);
        }
        WorkerTensorChannel.countDeviceCopy();
        clock = ChannelPhases.end(ChannelPhases.Phase.COPY_OUT, clock);
        boolean first = copied[slot] == null;
        if (first) {
            copied[slot] = DeviceEvent.takePooledInterprocess(device);
        }
        copied[slot].record(stream);
        if (first) {
            control.putEventHandle(leaf.profile(), slot, rank, copied[slot].ipcHandle());
        }
        ChannelPhases.end(ChannelPhases.Phase.COMPLETION_RECORD, clock);
        return out;
    }

    /** Keeps {@code slot}'s bytes from {@code offset} as a tensor of the profile's {@code shape} and {@code dtype}. */
    private void makeSlotView(int slot, long offset, long[] shape, ScalarType dtype) {
        try (Tensor slice = pool.narrow(0, offset, ShmTensors.byteSize(shape, dtype)); Tensor typed = slice.view(dtype)) {
            slotViews[slot] = typed.view(shape);
        }
    }

    /**
     * Finishes this side's device work on the pool, then releases: a consumer synchronizes its completion events and
     * gives them back to the pool; the producer waits for the last ACKs and copies of the attached consumers (see the
     * class comment) and its own staging, then closes the ready events and the loan. Either side drops its pool handle.
     * Idempotent.
     *
     * @throws org.dtorch.core.device.DeviceTimeoutException if this side's device work did not finish within the
     *                                                       channel's timeout (everything is released anyway)
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        Deadline deadline = Deadline.after(control.options().timeout());
        try {
            if (loan != null) {
                finishConsumerCopies(deadline);
                for (DeviceEvent event : ready) {
                    event.synchronize(left(deadline));
                }
            } else {
                for (DeviceEvent event : copied) {
                    if (event != null) {
                        event.synchronize(left(deadline));
                    }
                }
            }
        } finally {
            release();
        }
    }

    /** Producer: waits until no attached consumer copies from the pool any more. */
    private void finishConsumerCopies(Deadline deadline) {
        for (int s = 0; s < ChannelLayout.SLOTS; s++) {
            if (staged[s] == 0 || !control.awaitAcksBeforeRelease(profile, s, staged[s], deadline)) {
                continue;
            }
            for (int r = 0; r < consumerCopies[s].length; r++) {
                DeviceEvent copy = consumerCopy(s, r);
                if (copy != null && control.consumerGone(r) == null) {
                    copy.synchronize(left(deadline));
                }
            }
        }
    }

    private static Duration left(Deadline deadline) {
        return Duration.ofNanos(Math.max(0, deadline.remainingNanos()));
    }

    private void release() {
        Arrays.stream(slotViews).filter(v -> v != null).forEach(Tensor::close);
        if (outOptions != null) {
            outOptions.close();
        }
        if (loan != null) {
            Arrays.stream(ready).forEach(DeviceEvent::close);
            Arrays.stream(consumerCopies).flatMap(Arrays::stream).filter(e -> e != null).forEach(DeviceEvent::close);
            loan.close();
        } else {
            Arrays.stream(readyOpened).filter(e -> e != null).forEach(DeviceEvent::close);
            Arrays.stream(copied).filter(e -> e != null).forEach(DeviceEvent::returnPooledInterprocess);
        }
        pool.close();
    }
}
