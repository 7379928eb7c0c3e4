package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.cuda.cudart.cudaIpcMemHandle_t;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;
import org.bytedeco.pytorch.PointerConsumer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaIpcHandleKey;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.memory.ProcessMemory;
import org.dtorch.core.tensor.TorchTensors;

/**
 * CUDA tensors between processes of one host, through CUDA IPC, as {@code torch.multiprocessing} shares them:
 * the producer {@link #lend lends} a tensor (an IPC handle of its allocation's base, the tensor's offset in it,
 * and an interprocess event after its writes, in a {@link CudaIpcDescriptor}) and keeps it alive until its
 * consumers are done; a consumer {@link #view views} the memory without copying.
 *
 * <p>Why the allocation's base: libtorch's caching allocator hands out sub-blocks of larger
 * {@code cudaMalloc} allocations, and CUDA exports whole allocations only. {@code cuMemGetAddressRange} finds
 * the allocation of a tensor's first byte.
 *
 * <p>What is cached: opening a handle costs about 1.2 ms (measured on the H200), and CUDA maps an allocation
 * once per process, so each process keeps the allocations it opened, per device and keyed by the 64 handle
 * bytes (CUDA gives a new allocation a new handle even at a reused address), and opens a handle once. The
 * number of mappings a process keeps is bounded ({@value #MAPPING_LIMIT_PROPERTY}, default
 * {@value #DEFAULT_MAPPING_LIMIT}): past it, the least recently used mappings that no view uses are closed,
 * on a helper thread once the device's pending work (which may still read them) has passed. Mappings of
 * producers that exited are closed on that thread without the wait ({@link #closeMappingsOfExitedProducers()}
 * says why).
 * {@link #mappingsOpened()} counts the opens, for tests.
 *
 * <p>A view of another process's memory is valid as long as its producer keeps lending it; the protocols that
 * use this class (the File store, File promises) say when that ends. A view made in the producer's own process
 * uses the producer's address (CUDA does not open a process's own handles).
 *
 * <p>Thread-safe: the mapping cache and view registry are guarded by one lock; the deleter may run on any
 * thread.
 */
public final class CudaIpcTensors {
    /** System property: the most mappings of other processes' allocations one process keeps. */
    public static final String MAPPING_LIMIT_PROPERTY = "dtorch.cuda.ipc.mappingLimit";
    /** Default of {@value #MAPPING_LIMIT_PROPERTY}. */
    public static final int DEFAULT_MAPPING_LIMIT = 256;

    private static final System.Logger LOG = System.getLogger(CudaIpcTensors.class.getName());
    private static final Object LOCK = new Object();
    /** Allocations of other processes mapped here, least recently used first. Guarded by LOCK. */
    private static final LinkedHashMap<CudaIpcHandleKey, Mapping> MAPPINGS = new LinkedHashMap<>(16, 0.75f, true);
    /** Views alive per data address. Guarded by LOCK. */
    private static final Map<Long, ViewsAt> VIEWS = new HashMap<>();
    private static final AtomicLong OPENED = new AtomicLong();
    private static final AtomicInteger LOANS = new AtomicInteger();
    private static final Map<String, TensorOptions> OPTIONS = new ConcurrentHashMap<>();
    private static final PointerConsumer DELETER = new PointerConsumer() {
        @Override
        public void call(Pointer data) {
            released(data.address());
        }
    };

    private CudaIpcTensors() {
    }


    /** Where an allocation is in this process; {@code imported} when this process opened it (and closes it). */
    private static final class Mapping {
        final int device;
        final int producerPid;
        final long base;
        final boolean imported;
        /** The allocation's size: what an imported mapping counts in {@link ProcessMemory#CUDA_IPC_MAPPINGS}. */
        final long bytes;
        int views;

        Mapping(int device, int producerPid, long base, boolean imported, long bytes) {
            this.device = device;
            this.producerPid = producerPid;
            this.base = base;
            this.imported = imported;
            this.bytes = bytes;
        }
    }

    /**
     * The views alive at one address. libtorch's deleter names only the address, so views there cannot be told
     * apart: once one of them carries a release action, every view freed there counts as possibly read until the
     * last one is gone and the device has passed; then all their actions run. Two views at one address are of one
     * block of one producer, so a release that waits for the other view is late, never early.
     */
    private static final class ViewsAt {
        final Mapping mapping;
        final List<Runnable> releases = new ArrayList<>();
        int alive;
        /** Views freed here whose mapping count waits for the releases. */
        int freedPending;

        ViewsAt(Mapping mapping) {
            this.mapping = mapping;
        }
    }

    /** A pointer at a raw address, for the CUDA and libtorch calls. */
    private static final class RawPointer extends Pointer {
        RawPointer(long at) {
            this.address = at;
        }
    }

    // ---- producing -----------------------------------------------------------------------------------

    /**
     * A tensor lent to other processes: the producer's reference to it (which keeps its memory allocated), the
     * interprocess event recorded after its writes, and the {@link CudaIpcDescriptor} to publish. The producer
     * closes the loan once every consumer is done.
     *
     * <p>Not thread-safe: one owner closes it; {@link #close()} is idempotent.
     */
    public static final class Loan implements AutoCloseable {
        private final Tensor value;
        private final DeviceEvent written;
        private final CudaIpcDescriptor descriptor;
        private boolean closed;

        private Loan(Tensor value, DeviceEvent written, CudaIpcDescriptor descriptor) {
            this.value = value;
            this.written = written;
            this.descriptor = descriptor;
            LOANS.incrementAndGet();
        }

        /** What consumers need to view the tensor. */
        public CudaIpcDescriptor descriptor() {
            return descriptor;
        }

        /** Drops the producer's reference and the event: the memory goes back to libtorch's allocator. */
        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            LOANS.decrementAndGet();
            if (written != null) {
                DeviceEvent.returnPooledInterprocess(written); // every consumer is done waiting for it
            }
            value.close();
        }
    }

    /**
     * Lends {@code value}, written by work on {@code stream}: records an interprocess event there (the host does
     * not wait) and exports the allocation that holds the tensor.
     *
     * @throws IllegalArgumentException if {@code value} is not a CUDA tensor of {@code stream}'s device
     * @throws IllegalStateException    if CUDA cannot export the memory (for instance memory that libtorch's
     *                                  expandable segments map, which CUDA IPC does not share)
     */
    public static Loan lend(Tensor value, DeviceStream stream) {
        Objects.requireNonNull(value, "value");
        Objects.requireNonNull(stream, "stream");
        if (!value.is_cuda()) {
            throw new IllegalArgumentException("only CUDA tensors are lent through CUDA IPC, got " + TorchTensors.describe(value));
        }
        Device device = TorchTensors.device(value);
        if (!stream.device().equals(device)) {
            throw new IllegalArgumentException("a " + TorchTensors.describe(value) + " lent from " + stream
                + ": the stream that wrote it must be of the tensor's device");
        }
        Cuda.require(device);
        long[] strides = strides(value);
        int pid = Processes.currentPid();
        if (value.numel() == 0) {
            return new Loan(new Tensor(value), null, CudaIpcDescriptor.empty(device.index(), pid, strides));
        }
        // A pooled event: consumers open its handle once and keep it (DeviceEvent.openIpcCached).
        DeviceEvent written = DeviceEvent.takePooledInterprocess(device);
        try {
            // An idle stream has written the value already: the pooled event's last record, which every consumer
            // of its previous loan waited for, has passed too, so consumers skip the wait and the producer's context
            // gets no command: a record in the producer's context right before the consumer's copy slows that copy
            // down. Otherwise the event marks the stream's end, as torch does.
            if (!written.hasRecord() || !stream.query()) {
                written.record(stream);
            }
            byte[] eventHandle = written.ipcHandle();
            long address = TorchTensors.address(value);
            long[] base = new long[1];
            long size;
            byte[] memHandle = new byte[CudaIpcDescriptor.HANDLE_BYTES];
            int previous = makeCurrent(device.index());
            try {
                try (SizeTPointer sizeOut = new SizeTPointer(1)) {
                    int result = cudart.cuMemGetAddressRange(base, sizeOut, address);
                    if (result != cudart.CUDA_SUCCESS) {
                        throw new IllegalStateException("cuMemGetAddressRange of " + TorchTensors.describe(value) + " failed: "
                            + driverError(result));
                    }
                    size = sizeOut.get();
                }
                exportHandle(value, device.index(), base[0], size, memHandle);
            } finally {
                restore(previous, device.index());
            }
            CudaIpcDescriptor descriptor = new CudaIpcDescriptor(device.index(), pid, base[0], size, address - base[0], strides, memHandle,
                eventHandle);
            return new Loan(new Tensor(value), written, descriptor);
        } catch (RuntimeException e) {
            DeviceEvent.returnPooledInterprocess(written);
            throw e;
        }
    }

    /** The exported handle of an allocation, and the driver's id of that allocation when it was exported. */
    private record Exported(long bufferId, long size, byte[] handle) {
    }

    /**
     * Handles this process exported, by device and allocation base. The driver gives every allocation an id that
     * is never reused in the process ({@code CU_POINTER_ATTRIBUTE_BUFFER_ID}), so a cached handle is used only
     * while the allocation at that base is still the one it was made for; libtorch's allocator keeps its segments,
     * so a steady producer exports each allocation once, as torch's caching allocator does.
     */
    private static final Map<Long, Exported> EXPORTED_HANDLES = new ConcurrentHashMap<>();

    /** Writes the IPC handle of the allocation at {@code base} into {@code out}, exporting it once per allocation. */
    private static void exportHandle(Tensor value, int device, long base, long size, byte[] out) {
        long id;
        try (org.bytedeco.javacpp.LongPointer bufferId = new org.bytedeco.javacpp.LongPointer(1)) {
            int result = cudart.cuPointerGetAttribute(bufferId, cudart.CU_POINTER_ATTRIBUTE_BUFFER_ID, base);
            if (result != cudart.CUDA_SUCCESS) {
                throw new IllegalStateException("cuPointerGetAttribute(BUFFER_ID) of " + TorchTensors.describe(value) + " failed: "
                    + driverError(result));
            }
            id = bufferId.get();
        }
        long key = ((long) device << 56) ^ base;
        Exported known = EXPORTED_HANDLES.get(key);
        if (known == null || known.bufferId != id || known.size != size) {
            byte[] bytes = new byte[CudaIpcDescriptor.HANDLE_BYTES];
            try (cudaIpcMemHandle_t handle = new cudaIpcMemHandle_t(); RawPointer allocation = new RawPointer(base)) {
                check(cudart.cudaIpcGetMemHandle(handle, allocation), "cudaIpcGetMemHandle of " + TorchTensors.describe(value));
                MemorySegment.copy(segment(handle), ValueLayout.JAVA_BYTE, 0, bytes, 0, CudaIpcDescriptor.HANDLE_BYTES);
            }
            known = new Exported(id, size, bytes);
            EXPORTED_HANDLES.put(key, known);
        }
        System.arraycopy(known.handle, 0, out, 0, CudaIpcDescriptor.HANDLE_BYTES);
    }

    private static long[] strides(Tensor value) {
        int dims = (int) value.dim();
        long[] strides = new long[dims];
        for (int d = 0; d < dims; d++) {
            strides[d] = value.stride(d);
        }
        return strides;
    }

    // ---- consuming -----------------------------------------------------------------------------------

    /**
     * A tensor of {@code shape} and {@code dtype} over the memory {@code descriptor} names, without copying; on
     * {@code cuda:<descriptor.device()>} of this process. Opens the allocation the first time this process sees
     * it. Does not wait for the producer's event: the caller does, on its stream or on the host.
     *
     * @param onRelease what runs once libtorch freed the view and the work this process had issued to the
     *                  device by then has finished (on a helper thread); null for nothing
     * @throws IllegalStateException if CUDA cannot open the allocation (its producer exited, or freed it), or the
     *                               descriptor does not fit the shape
     */
    public static Tensor view(CudaIpcDescriptor descriptor, long[] shape, ScalarType dtype, Runnable onRelease) {
        Objects.requireNonNull(descriptor, "descriptor");
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(dtype, "dtype");
        Device device = Device.cuda(descriptor.device());
        Cuda.require(device);
        descriptor.checkFits(shape, torch.elementSize(dtype));
        TensorOptions options = options(dtype, device);
        if (descriptor.isEmpty()) {
            Tensor empty = torch.empty(shape, options, new org.bytedeco.pytorch.MemoryFormatOptional());
            if (onRelease != null) {
                onRelease.run(); // nothing of the producer is used
            }
            return empty;
        }
        long address;
        synchronized (LOCK) {
            Mapping mapping = acquire(descriptor);
            address = mapping.base + descriptor.offset();
            ViewsAt views = VIEWS.computeIfAbsent(address, a -> new ViewsAt(mapping));
            if (views.mapping != mapping && (mapping.imported || views.mapping.imported)) {
                throw new IllegalStateException("two mappings at address 0x" + Long.toHexString(address) + " on cuda:" + mapping.device);
            }
            views.alive++;
            views.mapping.views++; // for the producer's own address, the first view's stands for all
            if (onRelease != null) {
                views.releases.add(onRelease);
            }
        }
        try (RawPointer data = new RawPointer(address)) {
            return torch.from_blob(data, shape, descriptor.strides(), DELETER, options);
        } catch (RuntimeException | Error e) {
            synchronized (LOCK) {
                VIEWS.get(address).releases.remove(onRelease); // no view was made: its owner hears of the failure instead
            }
            released(address);
            throw e;
        }
    }

    /** The mapping of the descriptor's allocation, opening it if this process has none. LOCK held. */
    private static Mapping acquire(CudaIpcDescriptor descriptor) {
        if (descriptor.producerPid() == Processes.currentPid()) {
            return new Mapping(descriptor.device(), descriptor.producerPid(), descriptor.allocationBase(), false, descriptor.allocationSize());
        }
        CudaIpcHandleKey key = new CudaIpcHandleKey(descriptor.device(), descriptor.memHandle());
        Mapping mapping = MAPPINGS.get(key);
        if (mapping != null) {
            return mapping;
        }
        long base = open(descriptor);
        mapping = new Mapping(descriptor.device(), descriptor.producerPid(), base, true, descriptor.allocationSize());
        ProcessMemory.CUDA_IPC_MAPPINGS.add(mapping.bytes);
        MAPPINGS.put(key, mapping);
        trim(mapping);
        return mapping;
    }

    private static long open(CudaIpcDescriptor descriptor) {
        int previous = makeCurrent(descriptor.device());
        try (cudaIpcMemHandle_t handle = new cudaIpcMemHandle_t(); PointerPointer<Pointer> out = new PointerPointer<>(1)) {
            MemorySegment.copy(descriptor.memHandle(), 0, segment(handle), ValueLayout.JAVA_BYTE, 0, CudaIpcDescriptor.HANDLE_BYTES);
            int result = cudart.cudaIpcOpenMemHandle(out, handle, cudart.cudaIpcMemLazyEnablePeerAccess);
            if (result != cudart.cudaSuccess) {
                cudart.cudaGetLastError(); // clear it, or libtorch's next launch check reports it as its own
                String producer = Processes.isAlive(descriptor.producerPid()) ? "" : " (the producer, pid " + descriptor.producerPid()
                    + ", has exited)";
                throw new IllegalStateException("cudaIpcOpenMemHandle of " + descriptor + " failed: " + runtimeError(result) + producer);
            }
            OPENED.incrementAndGet();
            return out.get(0).address();
        } finally {
            restore(previous, descriptor.device());
        }
    }

    /**
     * Keeps the cache small, after {@code keep} was opened (never closing that one): the unused mappings of
     * producers that exited, and past the limit the least recently used unused ones, leave the cache now and are
     * closed on the helper thread (the evicted ones once their device's pending work has passed). LOCK held.
     */
    private static void trim(Mapping keep) {
        int limit = Integer.getInteger(MAPPING_LIMIT_PROPERTY, DEFAULT_MAPPING_LIMIT);
        List<Mapping> exited = new ArrayList<>();
        List<Mapping> evicted = new ArrayList<>();
        Map<Integer, Boolean> alive = new HashMap<>();
        int left = MAPPINGS.size();
        for (Iterator<Mapping> it = MAPPINGS.values().iterator(); it.hasNext(); ) {
            Mapping m = it.next();
            if (m == keep || m.views > 0) {
                continue;
            }
            if (!alive.computeIfAbsent(m.producerPid, Processes::isAlive)) {
                it.remove();
                exited.add(m);
                left--;
            } else if (left > limit) {
                it.remove();
                evicted.add(m);
                left--;
            }
        }
        closeLater(exited);
        if (!evicted.isEmpty()) {
            Releaser.EXECUTOR.execute(() -> {
                evicted.stream().mapToInt(m -> m.device).distinct().forEach(CudaIpcTensors::synchronizeDevice);
                closeNow(evicted);
            });
        }
    }

    /**
     * Closes every mapping of another process's allocation that no view uses, after waiting for the pending work
     * of their devices, which may still read them; the next view of those allocations opens them again. For a
     * program that wants the memory back now, and for tests.
     *
     * @return how many were closed
     */
    public static int closeUnusedMappings() {
        synchronized (LOCK) {
            List<Mapping> closing = new ArrayList<>();
            for (Iterator<Mapping> it = MAPPINGS.values().iterator(); it.hasNext(); ) {
                Mapping m = it.next();
                if (m.views == 0) {
                    it.remove();
                    closing.add(m);
                }
            }
            closing.stream().mapToInt(m -> m.device).distinct().forEach(CudaIpcTensors::synchronizeDevice);
            closeNow(closing);
            return closing.size();
        }
    }

    /**
     * Drops the mappings of producers that exited and that no view uses from the cache, and closes them on the
     * helper thread without waiting for the device: work that reads a dead producer's memory has run already (the
     * producer's event had passed and the consumer waited for its own stream before it finished) or waits behind an
     * event that a killed process may never complete, so a device-wide wait could block forever, and so could the
     * close itself if the driver synchronizes in it: the caller never waits for it. A consumer calls this once it
     * is done with those producers (the File store does on close), so that nothing of theirs stays mapped.
     *
     * @return how many left the cache
     */
    public static int closeMappingsOfExitedProducers() {
        synchronized (LOCK) {
            List<Mapping> closing = new ArrayList<>();
            Map<Integer, Boolean> alive = new HashMap<>();
            for (Iterator<Mapping> it = MAPPINGS.values().iterator(); it.hasNext(); ) {
                Mapping m = it.next();
                if (m.views == 0 && !alive.computeIfAbsent(m.producerPid, Processes::isAlive)) {
                    it.remove();
                    closing.add(m);
                }
            }
            closeLater(closing);
            DeviceEvent.closeOpenedIpcEvents(pid -> !alive.computeIfAbsent(pid, Processes::isAlive));
            return closing.size();
        }
    }

    /** Closes mappings already removed from the cache on the helper thread, without a device wait. */
    private static void closeLater(List<Mapping> closing) {
        if (!closing.isEmpty()) {
            Releaser.EXECUTOR.execute(() -> closeNow(closing));
        }
    }

    /**
     * Closes mappings already removed from the cache. CUDA counts the opens of one handle in a process, so a
     * view that opened the same allocation again meanwhile keeps its own mapping.
     */
    private static void closeNow(List<Mapping> closing) {
        for (Mapping m : closing) {
            int previous = makeCurrent(m.device);
            try (RawPointer at = new RawPointer(m.base)) {
                int result = cudart.cudaIpcCloseMemHandle(at);
                ProcessMemory.CUDA_IPC_MAPPINGS.subtract(m.bytes);
                if (result != cudart.cudaSuccess) {
                    cudart.cudaGetLastError();
                    LOG.log(System.Logger.Level.WARNING, "cudaIpcCloseMemHandle of an allocation of pid " + m.producerPid + " on cuda:"
                        + m.device + " failed: " + runtimeError(result));
                }
            } finally {
                restore(previous, m.device);
            }
        }
    }

    /**
     * libtorch freed a view. Where no view of that address carries a release action, the mapping loses it at once
     * (the File store's consumer waited for its stream before it finished). Otherwise, once the last view there is
     * gone, the helper thread waits for the device's pending work, which may still read the views, then drops them
     * from the mapping and runs the actions.
     */
    private static void released(long address) {
        List<Runnable> releases;
        int freed;
        Mapping mapping;
        synchronized (LOCK) {
            ViewsAt views = VIEWS.get(address);
            if (views == null) {
                return;
            }
            views.alive--;
            views.freedPending++;
            if (views.releases.isEmpty()) {
                views.mapping.views -= views.freedPending;
                views.freedPending = 0;
            }
            if (views.alive > 0) {
                return;
            }
            VIEWS.remove(address);
            if (views.releases.isEmpty()) {
                return;
            }
            releases = List.copyOf(views.releases);
            freed = views.freedPending;
            mapping = views.mapping;
        }
        int device = mapping.device;
        Releaser.EXECUTOR.execute(() -> {
            try {
                synchronizeDevice(device);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "waiting for cuda:" + device + " before releasing a CUDA IPC view failed", e);
            }
            synchronized (LOCK) {
                mapping.views -= freed;
            }
            for (Runnable release : releases) {
                try {
                    release.run();
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "releasing a CUDA IPC view of cuda:" + device + " failed", e);
                }
            }
        });
    }

    /** The thread that waits for a device before it tells a producer that a view is gone. */
    private static final class Releaser {
        static final ExecutorService EXECUTOR = Executors.newSingleThreadExecutor(
            Thread.ofPlatform().daemon().name("dtorch-cuda-ipc-release").factory());
    }

    // ---- counts, for tests ---------------------------------------------------------------------------

    /** How many allocations of other processes this process has opened so far (each open is a cache miss). */
    public static long mappingsOpened() {
        return OPENED.get();
    }

    /** How many loans of this process are open (lent and not yet given back); for leak checks. */
    public static int liveLoanCount() {
        return LOANS.get();
    }

    /** How many allocations of other processes this process keeps mapped now. */
    public static int mappingCount() {
        synchronized (LOCK) {
            return MAPPINGS.size();
        }
    }

    /** How many views of lent memory are alive in this process; for leak checks. */
    public static int liveViewCount() {
        synchronized (LOCK) {
            return VIEWS.values().stream().mapToInt(v -> v.alive).sum();
        }
    }

    // ---- CUDA calls ----------------------------------------------------------------------------------

    private static TensorOptions options(ScalarType dtype, Device device) {
        return OPTIONS.computeIfAbsent(dtype.name() + "@" + device, k -> TorchTensors.options(dtype, device));
    }

    /** The 64 bytes of a handle struct, in place. */
    private static MemorySegment segment(cudaIpcMemHandle_t handle) {
        return MemorySegment.ofAddress(handle.address()).reinterpret(CudaIpcDescriptor.HANDLE_BYTES);
    }

    /**
     * Makes {@code device} the calling thread's current device, with its primary context current for the driver
     * API ({@code cudaSetDevice} does both since CUDA 12); returns the device that was current.
     */
    private static int makeCurrent(int device) {
        int[] current = new int[1];
        check(cudart.cudaGetDevice(current), "cudaGetDevice");
        check(cudart.cudaSetDevice(device), "cudaSetDevice(" + device + ")");
        return current[0];
    }

    private static void restore(int previous, int device) {
        if (previous != device) {
            check(cudart.cudaSetDevice(previous), "cudaSetDevice(" + previous + ")");
        }
    }

    private static void synchronizeDevice(int device) {
        int previous = makeCurrent(device);
        try {
            check(cudart.cudaDeviceSynchronize(), "cudaDeviceSynchronize on cuda:" + device);
        } finally {
            restore(previous, device);
        }
    }

    private static void check(int result, String call) {
        if (result != cudart.cudaSuccess) {
            cudart.cudaGetLastError();
            throw new IllegalStateException(call + " failed: " + runtimeError(result));
        }
    }

    private static String runtimeError(int result) {
        BytePointer text = cudart.cudaGetErrorString(result);
        return (text == null || text.isNull() ? "CUDA error" : text.getString()) + " (" + result + ")";
    }

    private static String driverError(int result) {
        try (PointerPointer<BytePointer> name = new PointerPointer<>(1)) {
            if (cudart.cuGetErrorName(result, name) == cudart.CUDA_SUCCESS && name.get(0) != null) {
                return name.get(BytePointer.class, 0).getString() + " (" + result + ")";
            }
        }
        return "CUresult " + result;
    }
}
