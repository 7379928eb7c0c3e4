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
 * and cached there). Per slot a reusable interprocess ready event: the producer copies into the slot on its current
 * stream and records the event, the host does not wait; a consumer's current stream waits on it only if it has not
 * completed, copies out, and the consumer thread waits for that copy's own event before its ACK is published. So an
 * ACK means the consumer's copy is done, and the producer stages into the slot again as soon as it has every ACK; no
 * device-wide synchronization anywhere. A leaf's handles:
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
    private final long stride;
    /** The pool's bytes: the producer's tensor, or a consumer's view of it. */
    private final Tensor pool;
    private final CudaIpcDescriptor lent;
    /** Producer only: the loan that keeps the pool exported, and each slot's ready event. */
    private final CudaIpcTensors.Loan loan;
    private final DeviceEvent[] ready;
    /** Consumer only: how long to wait for its own copy. */
    private final Duration timeout;
    private boolean closed;

    private CudaChannelSlots(String name, Device device, long stride, Tensor pool, CudaIpcDescriptor lent, CudaIpcTensors.Loan loan,
                             DeviceEvent[] ready, Duration timeout) {
        this.name = name;
        this.device = device;
        this.stride = stride;
        this.pool = pool;
        this.lent = lent;
        this.loan = loan;
        this.ready = ready;
        this.timeout = timeout;
    }

    /** Producer: allocates the pool for two slots of {@code bytes} on {@code device} and lends it. */
    static CudaChannelSlots create(String name, Device device, long bytes) {
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
            return new CudaChannelSlots(name, device, stride, pool, loan.descriptor(), loan, ready, null);
        } catch (RuntimeException e) {
            Arrays.stream(ready).filter(r -> r != null).forEach(DeviceEvent::close);
            if (loan != null) {
                loan.close();
            }
            pool.close();
            throw e;
        }
    }

    /** Consumer: views the pool a leaf names. */
    static CudaChannelSlots open(WorkerTensorRef.Leaf leaf, Duration timeout) {
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
        return new CudaChannelSlots(leaf.region(), Device.cuda(lent.device()), 0, pool, lent, null, null, timeout);
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
        byte[] out = new byte[HANDLES];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment descriptor = arena.allocate(CudaIpcDescriptor.SIZE);
            lent.writeTo(descriptor, 0);
            MemorySegment.copy(descriptor, ValueLayout.JAVA_BYTE, 0, out, 0, CudaIpcDescriptor.SIZE);
        }
        System.arraycopy(ready[slot].ipcHandle(), 0, out, CudaIpcDescriptor.SIZE, DeviceEvent.IPC_HANDLE_BYTES);
        return out;
    }

    @Override
    public void stage(int slot, Tensor source) {
        try (Tensor target = typedView(slotOffset(slot), TorchTensors.shape(source), TorchTensors.dtype(source))) {
            target.copy_(source);
        }
        ready[slot].record(DeviceStream.of(device));
    }

    @Override
    public Tensor copyOut(WorkerTensorRef.Leaf leaf, int rank, int world) {
        ScalarType dtype = ShmTensors.dtypeOf(leaf.dtype());
        DeviceStream stream = DeviceStream.of(device);
        byte[] eventHandle = Arrays.copyOfRange(leaf.handles(), CudaIpcDescriptor.SIZE, HANDLES);
        try (DeviceEvent staged = DeviceEvent.openIpcCached(device, eventHandle, lent.producerPid())) {
            if (!staged.query()) {
                staged.streamWaitEvent(stream);
            }
        }
        try (Tensor whole = typedView(leaf.offset(), leaf.shape(), dtype);
             Tensor part = ChannelSlots.rankShare(whole, leaf, rank, world);
             TensorOptions options = TorchTensors.options(dtype, device);
             DeviceEvent copied = DeviceEvent.create(device)) {
            Tensor out = torch.empty(TorchTensors.shape(part), options, NO_MEMORY_FORMAT);
            out.copy_(part);
            copied.record(stream);
            copied.synchronize(timeout);
            return out;
        }
    }

    /** A tensor of {@code shape} and {@code dtype} over the pool's bytes from {@code offset}. */
    private Tensor typedView(long offset, long[] shape, ScalarType dtype) {
        try (Tensor slice = pool.narrow(0, offset, ShmTensors.byteSize(shape, dtype)); Tensor typed = slice.view(dtype)) {
            return typed.view(shape);
        }
    }

    /** Producer: closes the slots' events and the loan; either side: drops its pool handle. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (loan != null) {
            Arrays.stream(ready).forEach(DeviceEvent::close);
            loan.close();
        }
        pool.close();
    }
}
