package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.shm.Processes;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;
import org.dtorch.core.shm.ShmMonitor;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The {@link TensorStore} for participants in several processes of one host (seed section 3.3): the
 * entries, the barrier and the participants' process ids live in a shared-memory control region named by
 * the instance id and the store key ({@link FileStoreLayout}); a process-shared futex monitor replaces the
 * seed's Boost interprocess mutex and condition.
 *
 * <p>Data path: a value of at most {@link FileStoreLayout#INLINE_CAPACITY} bytes is copied into its entry
 * and out again by each consumer. A larger value is copied once, by the producer, into a data region of its
 * own; each consumer gets a tensor that views that region without copying, valid as long as the consumer
 * keeps the tensor (the mapping lives until libtorch frees it). As with the memory store, the producer may
 * reuse the region once {@link #srcWaitUntilGetFinished} returns, so a consumer that keeps the value after
 * {@link #destFinishGet} must copy it. Producers keep a few finished data regions for reuse (their pages
 * are then already allocated and mapped), and consumers keep a few mappings, so a repeated exchange of a
 * large tensor costs one memory copy and no page faults.
 *
 * <p>CUDA values cross through CUDA IPC, without copying ({@link CudaIpcTensors}; docs/gpu.md, CUDA IPC):
 * {@code srcSet} records an interprocess event on the producer's stream (the host does not wait), publishes
 * the value's allocation handle, offset, strides and event handle in the entry, and keeps a reference to the
 * value; {@code destGet} views the allocation (opened once per process) and makes the consumer's stream wait for
 * the event; {@code destFinishGet} waits on the host for the consumer's stream, so that when
 * {@code srcWaitUntilGetFinished} returns no consumer reads the memory any more and the producer drops its
 * reference. A CUDA value for CPU consumers is copied to the host and published as a CPU value; a CPU value for
 * CUDA consumers is published as it is and each consumer copies it to its stream's device (a consumer on a CPU
 * stream takes it as it is).
 *
 * <p>Failures: a wait notices within {@value #PEER_CHECK_MILLIS} ms that a participant's process died
 * without closing, and fails naming its rank and pid; the host waits for CUDA events poll and check the same
 * way, since the event of a killed producer may never pass. The last participant to close removes the control
 * region and every data region; what a killed instance leaves behind is removed by
 * {@link org.dtorch.core.shm.ShmJanitor} when the next runtime starts.
 *
 * <p>Thread-safe: any participant may call any method concurrently; one instance belongs to one rank.
 */
public final class FileTensorStore extends TensorStore {
    static final long PEER_CHECK_MILLIS = 250;
    private static final long SLEEP_SLICE_NANOS = 250_000_000L;
    private static final int POOL_LIMIT = 4;
    private static final int MAPPED_LIMIT = 8;
    private static final int KEYS_SHOWN_IN_ERRORS = 8;
    /** How often a host wait for a CUDA event polls once its spin budget is spent. */
    static final long EVENT_POLL_MICROS = 20;

    private final String regionName;
    private final SharedRegion control;
    private final MemorySegment seg;
    private final ShmMonitor monitor;
    private final long spinNanos;
    private volatile boolean closed;
    /** True once this instance holds its rank's slot; a refused duplicate never touches the slot. Guarded by the monitor. */
    private boolean joined;

    /** A data region this rank produced into, and the sequence number in its name. */
    private record DataRegion(SharedRegion region, long sequence) {
    }

    /** Live keys this rank produced, with their data regions. Guarded by {@code this}. */
    private final Map<String, DataRegion> producing = new HashMap<>();
    /** This rank's references to live values published without a copy ({@link #allocate}). Guarded by {@code this}. */
    private final Map<String, Tensor> held = new HashMap<>();
    /** Finished data regions kept for reuse. Guarded by {@code this}. */
    private final List<DataRegion> pool = new ArrayList<>();
    /** Data regions of other ranks mapped here, least recently used first. Guarded by {@code this}. */
    private final LinkedHashMap<String, SharedRegion> mapped = new LinkedHashMap<>(16, 0.75f, true);
    private long nextDataSequence;
    /** What this rank lent and took through CUDA IPC. */
    private final FileStoreCudaExchanges cudaExchanges = new FileStoreCudaExchanges();

    /** Creates or joins the control region and waits for the others (constructor barrier). */
    FileTensorStore(TensorStoreCreateInfo info) {
        super(info);
        byte[] storeKeyBytes = utf8(info.storeKey());
        if (storeKeyBytes.length > MAX_STORE_KEY_BYTES) {
            throw new IllegalArgumentException("store key '" + info.storeKey() + "' is " + storeKeyBytes.length
                + " bytes; a File store key has at most " + MAX_STORE_KEY_BYTES);
        }
        if (info.worldSize() > MAX_WORLD_SIZE) {
            throw new IllegalArgumentException("store '" + info.storeKey() + "': a File store has at most " + MAX_WORLD_SIZE
                + " participants, got worldSize " + info.worldSize());
        }
        this.spinNanos = CommOptions.global().spinBeforePark().toNanos();
        this.regionName = regionName(info.instanceId(), info.storeKey());
        Deadline deadline = Deadline.after(timeout());
        this.control = openOrCreate(storeKeyBytes, deadline);
        this.seg = control.segment();
        this.monitor = new ShmMonitor(seg, MONITOR);
        try {
            join();
            barrier();
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** {@code dtorch-<instance>-st-<hash of the store key>}: the control region's name. */
    static String regionName(String instanceId, String storeKey) {
        String instance = instanceId.length() > 100 ? instanceId.substring(0, 100) : instanceId;
        return SharedRegion.PREFIX + instance + "-st-" + org.dtorch.core.communication.CommPaths.sha256Hex(storeKey).substring(0, 24);
    }

    /** The name of this store's control region; its data regions start with it. */
    public String regionName() {
        return regionName;
    }

    private SharedRegion openOrCreate(byte[] storeKeyBytes, Deadline deadline) {
        while (true) {
            Optional<SharedRegion> created = SharedRegion.create(regionName, REGION_SIZE);
            if (created.isPresent()) {
                SharedRegion region = created.get();
                MemorySegment s = region.segment();
                s.set(ValueLayout.JAVA_INT, VERSION_OFFSET, VERSION);
                s.set(ValueLayout.JAVA_INT, WORLD_SIZE, worldSize());
                s.set(ValueLayout.JAVA_INT, CAPACITY, ENTRY_CAPACITY);
                s.set(ValueLayout.JAVA_LONG, STORE_KEY_HASH, hash(storeKeyBytes));
                Shm.putString(s, STORE_KEY, MAX_STORE_KEY_BYTES + 4, storeKey());
                Shm.putIntRelease(s, MAGIC_OFFSET, MAGIC);
                return region;
            }
            Optional<SharedRegion> opened = SharedRegion.open(regionName);
            if (opened.isPresent()) {
                SharedRegion region = opened.get();
                try {
                    awaitInitialized(region, deadline);
                    checkCompatible(region, storeKeyBytes);
                    return region;
                } catch (RuntimeException e) {
                    region.close();
                    throw e;
                }
            }
            if (deadline.expired()) {
                throw new CommTimeoutException("creating store '" + storeKey() + "' (rank " + rank() + ") " + deadline.timedOutAfter()
                    + ": shared memory " + regionName + " kept appearing and vanishing");
            }
            Thread.onSpinWait();
        }
    }

    private void awaitInitialized(SharedRegion region, Deadline deadline) {
        if (region.size() != REGION_SIZE) {
            throw new IllegalStateException("shared memory " + regionName + " of store '" + storeKey() + "' has " + region.size()
                + " bytes, not the " + REGION_SIZE + " of this version; another program uses the name");
        }
        while (Shm.getIntAcquire(region.segment(), MAGIC_OFFSET) != MAGIC) {
            if (deadline.expired()) {
                throw new CommTimeoutException("joining store '" + storeKey() + "' (rank " + rank() + ") " + deadline.timedOutAfter()
                    + ": its creator never finished initializing shared memory " + regionName);
            }
            Thread.yield();
        }
    }

    private void checkCompatible(SharedRegion region, byte[] storeKeyBytes) {
        MemorySegment s = region.segment();
        int version = s.get(ValueLayout.JAVA_INT, VERSION_OFFSET);
        String key = Shm.getString(s, STORE_KEY);
        if (version != VERSION || !key.equals(storeKey())) {
            throw new IllegalStateException("shared memory " + regionName + " holds store '" + key + "' (layout version " + version
                + "), not store '" + storeKey() + "' (version " + VERSION + ")");
        }
        int existing = s.get(ValueLayout.JAVA_INT, WORLD_SIZE);
        if (existing != worldSize()) {
            throw new IllegalArgumentException("store '" + storeKey() + "' already exists with worldSize " + existing
                + "; this participant asked for worldSize " + worldSize());
        }
    }

    private void join() {
        monitor.lock();
        try {
            int other = seg.get(ValueLayout.JAVA_INT, pid(rank()));
            if (seg.get(ValueLayout.JAVA_BYTE, open(rank())) != 0 && Processes.isAlive(other)) {
                throw new IllegalStateException("store '" + storeKey() + "': rank " + rank() + " is already open in process " + other);
            }
            seg.set(ValueLayout.JAVA_INT, pid(rank()), Processes.currentPid());
            seg.set(ValueLayout.JAVA_BYTE, open(rank()), (byte) 1);
            joined = true;
            monitor.signalAll();
        } finally {
            monitor.unlock();
        }
    }

    /** The process id of every rank, as each recorded it when it joined; for the same-process check. */
    int[] participantPids() {
        enter("participantPids()");
        try {
            monitor.lock();
            try {
                int[] pids = new int[worldSize()];
                for (int r = 0; r < pids.length; r++) {
                    pids[r] = seg.get(ValueLayout.JAVA_INT, pid(r));
                }
                return pids;
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public void srcSet(String key, Tensor value, DeviceStream stream, int getCount, DeviceKind destGetDeviceKind) {
        String op = describe("srcSet", key);
        byte[] keyBytes = checkKey(key, "srcSet");
        DeviceKind valueKind = checkSrcSet(op, value, stream, getCount);
        if (valueKind == DeviceKind.CUDA) {
            if (destGetDeviceKind != DeviceKind.CPU) {
                lend(op, key, keyBytes, value, stream, getCount);
                return;
            }
            // CPU consumers: the bytes go to the host first, then into shared memory as any CPU value.
            try (Tensor onHost = moveToHost(op, value, stream)) {
                publish(op, key, keyBytes, onHost, getCount, DATA_REGION);
            }
            return;
        }
        if (destGetDeviceKind == DeviceKind.CUDA) {
            // Each consumer copies the value to its GPU; a host without CUDA would only fail them later.
            Cuda.require(Device.cuda(0));
            publish(op, key, keyBytes, value, getCount, TO_CUDA);
            return;
        }
        publish(op, key, keyBytes, value, getCount, DATA_REGION);
    }

    /** Publishes a CPU value in shared memory; {@code flags} is TO_CUDA when its consumers want it on their GPU. */
    private void publish(String op, String key, byte[] keyBytes, Tensor value, int getCount, int flags) {
        long[] shape = TorchTensors.shape(value);
        if (shape.length > MAX_DIMS) {
            throw new IllegalArgumentException(op + ": a File store moves tensors of at most " + MAX_DIMS + " dims, got "
                + TorchTensors.describe(value));
        }
        ScalarType dtype = TorchTensors.dtype(value);
        long nbytes = ShmTensors.byteSize(shape, dtype);
        enter(op);
        try {
            SharedRegion shared = allocatedRegionOf(value, nbytes);
            if (shared != null) {
                // Allocated in shared memory by this store: publish in place; consumers alias it.
                synchronized (this) {
                    held.put(key, new Tensor(value));
                }
                try {
                    reserve(op, key, keyBytes, shape, dtype, nbytes, getCount, null, shared.name(),
                        value.data_ptr().address() - shared.address(), flags, null);
                } catch (RuntimeException e) {
                    synchronized (this) {
                        held.remove(key).close();
                    }
                    throw e;
                }
                return;
            }
            long base = reserve(op, key, keyBytes, shape, dtype, nbytes, getCount, value, null, 0, flags, null);
            if (base < 0) {
                return; // inline: published already
            }
            DataRegion data;
            try {
                data = dataRegionFor(nbytes);
                try {
                    ShmTensors.copyInto(value, data.region().segment());
                } catch (RuntimeException e) {
                    recycle(data);
                    throw e;
                }
            } catch (RuntimeException e) {
                monitor.lock();
                try {
                    Shm.putIntRelease(seg, base + E_STATE, FREE);
                    monitor.signalAll();
                } finally {
                    monitor.unlock();
                }
                throw e;
            }
            synchronized (this) {
                producing.put(key, data);
            }
            monitor.lock();
            try {
                seg.set(ValueLayout.JAVA_LONG, base + E_DATA_SEQUENCE, data.sequence());
                Shm.putIntRelease(seg, base + E_STATE, LIVE);
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    /**
     * Publishes a CUDA value through CUDA IPC: the entry gets the value's {@link CudaIpcDescriptor} (its
     * allocation's handle, its offset there, and an interprocess event recorded on {@code stream}, which the
     * host does not wait for); this rank keeps the value until {@link #srcWaitUntilGetFinished}.
     */
    private void lend(String op, String key, byte[] keyBytes, Tensor value, DeviceStream stream, int getCount) {
        long[] shape = TorchTensors.shape(value);
        if (shape.length > MAX_DIMS) {
            throw new IllegalArgumentException(op + ": a File store moves tensors of at most " + MAX_DIMS + " dims, got "
                + TorchTensors.describe(value));
        }
        if (!TorchTensors.device(value).equals(stream.device())) {
            throw new IllegalArgumentException(op + ": value is " + TorchTensors.describe(value) + " but stream is " + stream
                + "; CUDA IPC publishes the event of the value's own device");
        }
        ScalarType dtype = TorchTensors.dtype(value);
        long nbytes = ShmTensors.byteSize(shape, dtype);
        enter(op);
        try {
            CudaIpcTensors.Loan loan;
            try {
                loan = CudaIpcTensors.lend(value, stream);
            } catch (IllegalStateException e) {
                throw new IllegalStateException(op + ": " + e.getMessage(), e);
            }
            try {
                reserve(op, key, keyBytes, shape, dtype, nbytes, getCount, null, null, 0, CUDA_IPC, loan);
            } catch (RuntimeException e) {
                loan.close();
                throw e;
            }
        } finally {
            exit();
        }
    }

    /** A host copy of a CUDA value, ordered after {@code stream}'s work whatever the thread's current stream is. */
    private static Tensor moveToHost(String op, Tensor value, DeviceStream stream) {
        DeviceStream current = DeviceStream.of(stream.device());
        if (!current.equals(stream)) {
            try (DeviceEvent written = stream.recordEvent()) {
                written.streamWaitEvent(current);
            }
        }
        return moveForConsumers(op, value, DeviceKind.CPU);
    }

    /** The region this store allocated that holds {@code value}'s bytes contiguously, or null. */
    private SharedRegion allocatedRegionOf(Tensor value, long nbytes) {
        if (nbytes == 0 || !value.is_contiguous()) {
            return null;
        }
        SharedRegion region = ShmTensors.regionContaining(value.data_ptr().address(), nbytes);
        return region != null && region.name().startsWith(regionName + "-a") ? region : null;
    }

    /**
     * Claims a free entry for {@code key} and fills its metadata. A value already in shared memory
     * ({@code dataName}), a small one (copied into the entry) or a lent CUDA one ({@code loan}, kept from here until
     * the key is waited for) is published at once (returns -1); a large one leaves the entry RESERVED (returns its
     * offset) until its bytes are in a data region. {@code placement} is CUDA_IPC with {@code loan}, else DATA_REGION
     * or TO_CUDA (INLINE is decided here).
     */
    private long reserve(String op, String key, byte[] keyBytes, long[] shape, ScalarType dtype, long nbytes, int getCount,
                         Tensor value, String dataName, long dataOffset, int placement, CudaIpcTensors.Loan loan) {
        long keyHash = hash(keyBytes);
        monitor.lock();
        try {
            ensureOpen(op);
            int live = find(keyBytes, keyHash, false);
            if (live >= 0) {
                throw new IllegalStateException(op + ": the key is still live (" + counts(entry(live))
                    + "); call srcWaitUntilGetFinished or reset() before setting it again");
            }
            int slot = freeSlot();
            if (slot < 0) {
                throw new IllegalStateException(op + ": all " + ENTRY_CAPACITY + " entries of the store are live" + keysHint()
                    + "; wait for some with srcWaitUntilGetFinished first");
            }
            long base = entry(slot);
            boolean inline = dataName == null && loan == null && nbytes <= INLINE_CAPACITY;
            seg.set(ValueLayout.JAVA_INT, base + E_GET_COUNT, getCount);
            seg.set(ValueLayout.JAVA_INT, base + E_GETS, 0);
            seg.set(ValueLayout.JAVA_INT, base + E_FINISHES, 0);
            seg.set(ValueLayout.JAVA_INT, base + E_PRODUCER, rank());
            seg.set(ValueLayout.JAVA_INT, base + E_DTYPE, dtype.value);
            seg.set(ValueLayout.JAVA_INT, base + E_NDIM, shape.length);
            seg.set(ValueLayout.JAVA_INT, base + E_PLACEMENT, inline ? INLINE | placement : placement);
            seg.set(ValueLayout.JAVA_LONG, base + E_NBYTES, nbytes);
            seg.set(ValueLayout.JAVA_LONG, base + E_KEY_HASH, keyHash);
            for (int d = 0; d < shape.length; d++) {
                seg.set(ValueLayout.JAVA_LONG, base + E_SHAPE + 8L * d, shape[d]);
            }
            Shm.putString(seg, base + E_KEY, MAX_KEY_BYTES + 4, key);
            Shm.putString(seg, base + E_DATA_NAME, DATA_NAME_CAPACITY, dataName == null ? "" : dataName);
            seg.set(ValueLayout.JAVA_LONG, base + E_DATA_OFFSET, dataOffset);
            if (dataName != null || loan != null) {
                if (loan != null) {
                    // Kept under the monitor, as the entry goes LIVE: a loan is kept exactly while its key is live.
                    loan.descriptor().writeTo(seg, base + E_CUDA_IPC);
                    cudaExchanges.lent(key, loan);
                }
                Shm.putIntRelease(seg, base + E_STATE, LIVE);
                monitor.signalAll();
                return -1;
            }
            if (inline) {
                ShmTensors.copyInto(value, seg.asSlice(base + E_INLINE_BYTES, INLINE_CAPACITY));
                Shm.putIntRelease(seg, base + E_STATE, LIVE);
                monitor.signalAll();
                return -1;
            }
            Shm.putIntRelease(seg, base + E_STATE, RESERVED);
            return base;
        } finally {
            monitor.unlock();
        }
    }

    @Override
    public void srcWaitUntilGetFinished(String key, DeviceStream stream) {
        String op = describe("srcWaitUntilGetFinished", key);
        byte[] keyBytes = checkKey(key, "srcWaitUntilGetFinished");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            long keyHash = hash(keyBytes);
            Waiter waiter = new Waiter(op, deadline);
            CudaIpcTensors.Loan loan;
            monitor.lock();
            try {
                ensureOpen(op);
                int index = find(keyBytes, keyHash, false);
                if (index < 0) {
                    throw new IllegalStateException(op + ": the key is not live (never set, already waited for, or reset)");
                }
                long base = entry(index);
                int producer = seg.get(ValueLayout.JAVA_INT, base + E_PRODUCER);
                if (producer != rank()) {
                    throw new IllegalStateException(op + ": the key was set by rank " + producer + "; only its producer waits for it");
                }
                while (seg.get(ValueLayout.JAVA_INT, base + E_FINISHES) < seg.get(ValueLayout.JAVA_INT, base + E_GET_COUNT)) {
                    waiter.step(() -> seg.get(ValueLayout.JAVA_INT, base + E_FINISHES) + " of " + seg.get(ValueLayout.JAVA_INT, base + E_GET_COUNT)
                        + " consumers finished (" + seg.get(ValueLayout.JAVA_INT, base + E_GETS) + " took the tensor)");
                }
                loan = cudaExchanges.endLoan(key);
                Shm.putIntRelease(seg, base + E_STATE, FREE);
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
            synchronized (this) {
                DataRegion data = producing.remove(key);
                if (data != null) {
                    recycle(data);
                }
                Tensor published = held.remove(key);
                if (published != null) {
                    published.close();
                }
            }
            if (loan != null) {
                // Every consumer waited on its host for its own stream before it finished: no GPU work of theirs reads
                // the lent memory any more, so it goes back to the allocator right away.
                loan.close();
            }
        } finally {
            exit();
        }
    }

    @Override
    public Tensor destGet(String key, DeviceStream stream) {
        String op = describe("destGet", key);
        byte[] keyBytes = checkKey(key, "destGet");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            long keyHash = hash(keyBytes);
            Waiter waiter = new Waiter(op, deadline);
            long[] shape;
            ScalarType dtype;
            int placement;
            String dataName = null;
            long dataOffset = 0;
            boolean cacheable = false;
            CudaIpcDescriptor cuda = null;
            Tensor inlineCopy = null;
            long base;
            monitor.lock();
            try {
                while (true) {
                    ensureOpen(op);
                    int index = find(keyBytes, keyHash, true);
                    if (index >= 0) {
                        base = entry(index);
                        if (seg.get(ValueLayout.JAVA_INT, base + E_GETS) < seg.get(ValueLayout.JAVA_INT, base + E_GET_COUNT)) {
                            break;
                        }
                    }
                    waiter.step(() -> {
                        int live = find(keyBytes, keyHash, false);
                        return live < 0 ? "no producer set this key" + keysHint()
                            : "the key is " + counts(entry(live)) + "; no producer set it again";
                    });
                }
                placement = seg.get(ValueLayout.JAVA_INT, base + E_PLACEMENT);
                if (placement == CUDA_IPC) {
                    cuda = CudaIpcDescriptor.readFrom(seg, base + E_CUDA_IPC);
                    Cuda.require(Device.cuda(cuda.device())); // before taking: a consumer without that GPU takes nothing
                }
                seg.set(ValueLayout.JAVA_INT, base + E_GETS, seg.get(ValueLayout.JAVA_INT, base + E_GETS) + 1);
                shape = shapeOf(base);
                dtype = dtypeOf(op, base);
                if (placement == INLINE) {
                    return ShmTensors.copyOut(seg.asSlice(base + E_INLINE_BYTES, INLINE_CAPACITY), shape, dtype);
                }
                if (placement == (INLINE | TO_CUDA)) {
                    inlineCopy = ShmTensors.copyOut(seg.asSlice(base + E_INLINE_BYTES, INLINE_CAPACITY), shape, dtype);
                } else if (cuda == null) {
                    String allocated = Shm.getString(seg, base + E_DATA_NAME);
                    cacheable = allocated.isEmpty();
                    dataName = cacheable ? dataRegionName(seg.get(ValueLayout.JAVA_INT, base + E_PRODUCER),
                        seg.get(ValueLayout.JAVA_LONG, base + E_DATA_SEQUENCE)) : allocated;
                    dataOffset = seg.get(ValueLayout.JAVA_LONG, base + E_DATA_OFFSET);
                }
            } finally {
                monitor.unlock();
            }
            if (cuda != null) {
                try {
                    return cudaExchanges.take(op, key, cuda, shape, dtype, stream, deadline, this::awaitOnHost);
                } catch (RuntimeException e) {
                    untake(base);
                    throw e instanceof CommException ? e : new CommException(op + ": cannot take the CUDA value " + cuda + ": "
                        + e.getMessage(), e);
                }
            }
            Tensor value;
            try {
                value = inlineCopy != null ? inlineCopy : viewOf(dataName, dataOffset, cacheable, shape, dtype);
            } catch (RuntimeException e) {
                untake(base);
                throw new CommException(op + ": cannot map the value's data region " + dataName, e);
            }
            if ((placement & TO_CUDA) == 0 || stream.device().kind() != DeviceKind.CUDA) {
                return value; // a consumer on a CPU stream has no GPU to copy to: it takes the value as it is
            }
            try (Tensor onHost = value) {
                // Synchronous with the host (the source is pageable host memory): ready for any stream once it returns.
                return TorchTensors.to(onHost, stream.device());
            } catch (RuntimeException e) {
                untake(base);
                throw e;
            }
        } finally {
            exit();
        }
    }

    /** Gives back a take that failed after it was counted, so that another consumer can take the value. */
    private void untake(long base) {
        monitor.lock();
        try {
            seg.set(ValueLayout.JAVA_INT, base + E_GETS, seg.get(ValueLayout.JAVA_INT, base + E_GETS) - 1);
            monitor.signalAll();
        } finally {
            monitor.unlock();
        }
    }

    @Override
    public void destFinishGet(String key, DeviceStream stream) {
        String op = describe("destFinishGet", key);
        byte[] keyBytes = checkKey(key, "destFinishGet");
        Objects.requireNonNull(stream, "stream");
        enter(op);
        try {
            if (cudaExchanges.hasTakes()) {
                cudaExchanges.finish(op, key, stream, timeout(), this::awaitOnHost);
            }
            monitor.lock();
            try {
                ensureOpen(op);
                int index = find(keyBytes, hash(keyBytes), true);
                if (index < 0) {
                    throw new IllegalStateException(op + ": no destGet of this key is outstanding (the key is not set)");
                }
                long base = entry(index);
                int finishes = seg.get(ValueLayout.JAVA_INT, base + E_FINISHES);
                if (finishes >= seg.get(ValueLayout.JAVA_INT, base + E_GET_COUNT)) {
                    throw new IllegalStateException(op + ": more finishes than getCount; the key is " + counts(base));
                }
                if (finishes >= seg.get(ValueLayout.JAVA_INT, base + E_GETS)) {
                    throw new IllegalStateException(op + ": no destGet of this key is outstanding; the key is " + counts(base));
                }
                seg.set(ValueLayout.JAVA_INT, base + E_FINISHES, finishes + 1);
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    /**
     * Waits on the host until {@code event} has passed: spins for the spin budget, then polls every
     * {@value #EVENT_POLL_MICROS} us; between polls checks the deadline, interruption, and (every
     * {@value #PEER_CHECK_MILLIS} ms) that no participant died, since a killed producer's event may never pass.
     */
    private void awaitOnHost(String op, DeviceEvent event, Deadline deadline, Supplier<String> seen) {
        long spinUntil = System.nanoTime() + spinNanos;
        long nextPeerCheck = System.nanoTime() + PEER_CHECK_MILLIS * 1_000_000L;
        while (!event.query()) {
            if (deadline.expired()) {
                throw new CommTimeoutException(op + " " + deadline.timedOutAfter() + ": " + seen.get());
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new CommInterruptedException(op + " was interrupted: " + seen.get(), new InterruptedException());
            }
            long now = System.nanoTime();
            if (now - nextPeerCheck >= 0) {
                nextPeerCheck = now + PEER_CHECK_MILLIS * 1_000_000L;
                monitor.lock();
                try {
                    ensureOpen(op);
                    checkPeersAlive(op, seen);
                } finally {
                    monitor.unlock();
                }
            }
            if (now - spinUntil < 0) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(EVENT_POLL_MICROS * 1_000L);
            }
        }
    }

    @Override
    public void reset() {
        barrier();
        enter("reset()");
        try {
            monitor.lock();
            try {
                ensureOpen("reset()");
                for (int i = 0; i < ENTRY_CAPACITY; i++) {
                    Shm.putIntRelease(seg, entry(i) + E_STATE, FREE);
                }
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
            synchronized (this) {
                producing.values().forEach(this::recycle);
                producing.clear();
                held.values().forEach(Tensor::close);
                held.clear();
            }
            cudaExchanges.drop();
        } finally {
            exit();
        }
        barrier();
    }

    @Override
    public void barrier() {
        String op = "barrier() on store '" + storeKey() + "' (rank " + rank() + ")";
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            Waiter waiter = new Waiter(op, deadline);
            monitor.lock();
            try {
                ensureOpen(op);
                int generation = seg.get(ValueLayout.JAVA_INT, BARRIER_GENERATION);
                int arrived = seg.get(ValueLayout.JAVA_INT, BARRIER_ARRIVED) + 1;
                if (arrived == worldSize()) {
                    seg.set(ValueLayout.JAVA_INT, BARRIER_ARRIVED, 0);
                    seg.set(ValueLayout.JAVA_INT, BARRIER_GENERATION, generation + 1);
                    monitor.signalAll();
                    return;
                }
                seg.set(ValueLayout.JAVA_INT, BARRIER_ARRIVED, arrived);
                try {
                    while (seg.get(ValueLayout.JAVA_INT, BARRIER_GENERATION) == generation) {
                        ensureOpen(op);
                        waiter.step(() -> seg.get(ValueLayout.JAVA_INT, BARRIER_ARRIVED) + " of " + worldSize() + " ranks arrived");
                    }
                } catch (RuntimeException e) {
                    if (seg.get(ValueLayout.JAVA_INT, BARRIER_GENERATION) == generation) {
                        // withdraw, so the barrier stays usable for the others
                        seg.set(ValueLayout.JAVA_INT, BARRIER_ARRIVED, seg.get(ValueLayout.JAVA_INT, BARRIER_ARRIVED) - 1);
                    }
                    throw e;
                }
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    /**
     * Leaves the store. The last participant to leave (or the last one alive) removes the control region
     * and every data region; the others remove only the data regions they keep for reuse (a value they set
     * may still be read).
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        // A refused duplicate of an open rank must neither clear that rank's slot nor remove the live region.
        boolean last;
        monitor.lock();
        try {
            last = joined;
            if (joined) {
                seg.set(ValueLayout.JAVA_BYTE, open(rank()), (byte) 0);
            }
            for (int r = 0; r < worldSize() && last; r++) {
                if (r != rank() && seg.get(ValueLayout.JAVA_BYTE, open(r)) != 0 && Processes.isAlive(seg.get(ValueLayout.JAVA_INT, pid(r)))) {
                    last = false;
                }
            }
            monitor.signalAll();
        } finally {
            monitor.unlock();
        }
        synchronized (this) {
            for (DataRegion d : pool) {
                d.region().unlink();
                d.region().close();
            }
            pool.clear();
            for (DataRegion d : producing.values()) {
                if (last) {
                    d.region().unlink();
                }
                d.region().close();
            }
            producing.clear();
            held.values().forEach(Tensor::close);
            held.clear();
            mapped.values().forEach(SharedRegion::release);
            mapped.clear();
        }
        cudaExchanges.drop();
        if (cudaExchanges.tookAny()) {
            // The allocations of producers that exited stay mapped until something closes them.
            CudaIpcTensors.closeMappingsOfExitedProducers();
        }
        if (last) {
            control.unlink();
            SharedRegion.unlinkAll(regionName + "-");
        }
        control.close();
    }

    /** True once {@link #close()} was called. */
    public boolean isClosed() {
        return closed;
    }

    /** Number of keys live (set and not yet waited for); for tests and diagnostics. */
    public int liveKeyCount() {
        enter("liveKeyCount()");
        try {
            monitor.lock();
            try {
                int n = 0;
                for (int i = 0; i < ENTRY_CAPACITY; i++) {
                    if (seg.get(ValueLayout.JAVA_INT, entry(i) + E_STATE) != FREE) {
                        n++;
                    }
                }
                return n;
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    // ---- waiting -------------------------------------------------------------------------------------

    /**
     * One wait of one call: spins for the spin budget, then sleeps in slices; between slices checks the
     * deadline, interruption, and (every {@value #PEER_CHECK_MILLIS} ms) that no participant died.
     * Called with the monitor's lock held; returns with it held.
     */
    private final class Waiter {
        private final String op;
        private final Deadline deadline;
        private final long spinUntil;
        private long nextPeerCheck;

        Waiter(String op, Deadline deadline) {
            this.op = op;
            this.deadline = deadline;
            this.spinUntil = System.nanoTime() + spinNanos;
            this.nextPeerCheck = System.nanoTime() + PEER_CHECK_MILLIS * 1_000_000L;
        }

        void step(Supplier<String> seen) {
            long remaining = deadline.remainingNanos();
            if (remaining <= 0) {
                throw new CommTimeoutException(op + " " + deadline.timedOutAfter() + ": " + seen.get());
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new CommInterruptedException(op + " was interrupted: " + seen.get(), new InterruptedException());
            }
            long now = System.nanoTime();
            if (now - nextPeerCheck >= 0) {
                nextPeerCheck = now + PEER_CHECK_MILLIS * 1_000_000L;
                checkPeersAlive(op, seen);
            }
            monitor.awaitChange(monitor.sequence(), spinUntil, Math.min(remaining, SLEEP_SLICE_NANOS));
            ensureOpen(op);
        }
    }

    private void checkPeersAlive(String op, Supplier<String> seen) {
        for (int r = 0; r < worldSize(); r++) {
            if (seg.get(ValueLayout.JAVA_BYTE, open(r)) == 0) {
                continue;
            }
            int pid = seg.get(ValueLayout.JAVA_INT, pid(r));
            if (!Processes.isAlive(pid)) {
                throw new CommException(op + ": participant rank " + r + " (pid " + pid + ") exited without closing the store; "
                    + seen.get());
            }
        }
    }

    // ---- entries -------------------------------------------------------------------------------------

    /** The index of the entry holding {@code key}: LIVE only, or also RESERVED; -1 if none. Lock held. */
    private int find(byte[] keyBytes, long keyHash, boolean liveOnly) {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            long base = entry(i);
            int state = seg.get(ValueLayout.JAVA_INT, base + E_STATE);
            if (state == FREE || (liveOnly && state != LIVE)) {
                continue;
            }
            if (seg.get(ValueLayout.JAVA_LONG, base + E_KEY_HASH) == keyHash && keyEquals(seg, base, keyBytes)) {
                return i;
            }
        }
        return -1;
    }

    private int freeSlot() {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            if (seg.get(ValueLayout.JAVA_INT, entry(i) + E_STATE) == FREE) {
                return i;
            }
        }
        return -1;
    }

    private long[] shapeOf(long base) {
        int ndim = seg.get(ValueLayout.JAVA_INT, base + E_NDIM);
        long[] shape = new long[ndim];
        for (int d = 0; d < ndim; d++) {
            shape[d] = seg.get(ValueLayout.JAVA_LONG, base + E_SHAPE + 8L * d);
        }
        return shape;
    }

    private ScalarType dtypeOf(String op, long base) {
        int code = seg.get(ValueLayout.JAVA_INT, base + E_DTYPE);
        ScalarType dtype = ShmTensors.dtypeOf(code);
        if (dtype == null) {
            throw new IllegalStateException(op + ": the entry names dtype code " + code + ", which this libtorch does not know");
        }
        return dtype;
    }

    private String counts(long base) {
        int getCount = seg.get(ValueLayout.JAVA_INT, base + E_GET_COUNT);
        return "set for " + getCount + " consumer" + (getCount == 1 ? "" : "s") + ", " + seg.get(ValueLayout.JAVA_INT, base + E_GETS)
            + " took it, " + seg.get(ValueLayout.JAVA_INT, base + E_FINISHES) + " finished";
    }

    private String keysHint() {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            if (seg.get(ValueLayout.JAVA_INT, entry(i) + E_STATE) != FREE) {
                keys.add(FileStoreLayout.key(seg, entry(i)));
            }
        }
        if (keys.isEmpty()) {
            return " (no keys are live)";
        }
        keys.sort(null);
        String shown = String.join("', '", keys.subList(0, Math.min(KEYS_SHOWN_IN_ERRORS, keys.size())));
        return " (live keys: '" + shown + "'" + (keys.size() > KEYS_SHOWN_IN_ERRORS ? ", ..." : "") + ")";
    }

    // ---- data regions --------------------------------------------------------------------------------

    private String dataRegionName(int producerRank, long sequence) {
        return regionName + "-r" + producerRank + "-" + sequence;
    }

    /** A finished region of about the right size from the pool, or a new one. */
    private synchronized DataRegion dataRegionFor(long nbytes) {
        DataRegion best = null;
        for (DataRegion d : pool) {
            long size = d.region().size();
            if (size >= nbytes && size <= Math.max(2 * nbytes, nbytes + (1L << 20)) && (best == null || size < best.region().size())) {
                best = d;
            }
        }
        if (best != null) {
            pool.remove(best);
            return best;
        }
        while (true) {
            long sequence = nextDataSequence++;
            Optional<SharedRegion> created = SharedRegion.create(dataRegionName(rank(), sequence), nbytes);
            if (created.isPresent()) {
                return new DataRegion(created.get(), sequence);
            }
        }
    }

    /** Keeps a finished region for reuse, or removes it when the pool is full. */
    private synchronized void recycle(DataRegion data) {
        if (!closed && pool.size() < POOL_LIMIT) {
            pool.add(data);
            return;
        }
        data.region().unlink();
        data.region().close();
    }

    /**
     * A tensor over another rank's data region, mapping it. Pool regions are reused by their producer, so
     * their mappings are kept (a few); an allocated region lives as long as its tensor, so it is not.
     */
    private synchronized Tensor viewOf(String dataName, long offset, boolean cacheable, long[] shape, ScalarType dtype) {
        if (!cacheable) {
            try (SharedRegion region = SharedRegion.open(dataName).orElseThrow(() -> new IllegalStateException("shared memory "
                + dataName + " does not exist (its producer freed the value before every consumer took it)"))) {
                return ShmTensors.view(region, offset, shape, dtype);
            }
        }
        SharedRegion region = mapped.get(dataName);
        if (region == null) {
            region = SharedRegion.open(dataName).orElseThrow(() -> new IllegalStateException("shared memory " + dataName
                + " does not exist (its producer removed it before every consumer took the value)"));
            mapped.put(dataName, region);
            if (mapped.size() > MAPPED_LIMIT) {
                Iterator<SharedRegion> eldest = mapped.values().iterator();
                SharedRegion evicted = eldest.next();
                eldest.remove();
                evicted.release();
            }
        }
        return ShmTensors.view(region, offset, shape, dtype);
    }

    /**
     * A new tensor in a shared-memory region of its own: published with {@link #srcSet}, it is not copied,
     * and every consumer's {@link #destGet} aliases it (writes through any of them are seen by all). The
     * region goes when the tensor and every consumer's view are freed.
     */
    @Override
    public Tensor allocate(long[] shape, ScalarType dtype) {
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(dtype, "dtype");
        enter("allocate()");
        try {
            long nbytes = ShmTensors.byteSize(shape, dtype);
            SharedRegion region;
            synchronized (this) {
                while (true) {
                    Optional<SharedRegion> created = SharedRegion.create(regionName + "-a" + rank() + "-" + nextDataSequence++,
                        Math.max(1, nbytes));
                    if (created.isPresent()) {
                        region = created.get();
                        break;
                    }
                }
            }
            region.unlinkWhenUnmapped();
            try (region) {
                return ShmTensors.view(region, 0, shape, dtype);
            }
        } finally {
            exit();
        }
    }

    // ---- bookkeeping ---------------------------------------------------------------------------------

    /** Holds the control mapping for the duration of one call, so that a concurrent close cannot unmap it. */
    private void enter(String op) {
        if (closed || !control.retain()) {
            throw closedError(op);
        }
    }

    private void exit() {
        control.release();
    }

    private void ensureOpen(String op) {
        if (closed) {
            throw closedError(op);
        }
    }

    private IllegalStateException closedError(String op) {
        return new IllegalStateException(op + ": the store is closed");
    }

    private String describe(String method, String key) {
        return method + "('" + key + "') on store '" + storeKey() + "' (rank " + rank() + ")";
    }

    private byte[] checkKey(String key, String method) {
        ensureOpen(method + "('" + key + "') on store '" + storeKey() + "' (rank " + rank() + ")");
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException(method + " on store '" + storeKey() + "' (rank " + rank()
                + "): key must be a non-empty string, got " + (key == null ? "null" : "''"));
        }
        byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_KEY_BYTES) {
            throw new IllegalArgumentException(describe(method, key) + ": a File store key has at most " + MAX_KEY_BYTES
                + " bytes, got " + bytes.length);
        }
        return bytes;
    }
}
