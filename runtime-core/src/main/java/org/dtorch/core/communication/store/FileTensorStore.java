package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmMonitor;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.Tracer;

/**
 * The {@link TensorStore} for participants in several processes of one host (docs/process-mode.md,
 * FileTensorStore): the entries, the barrier and the participants' process ids live in a shared-memory control
 * region named by the instance id and the store key ({@link FileStoreLayout}); a process-shared futex monitor
 * guards it. This class is the protocol; {@link FileStoreHeader} creates or joins the control region,
 * {@link FileStoreEntries} reads and writes the entry table,
 * {@link FileStoreDataRegions} keeps the data regions, {@link FileStorePeers} the participants' liveness,
 * {@link FileStoreWait} the waits, and {@link FileStoreCudaExchanges} the CUDA IPC hand-offs.
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
 * <p>Failures: a wait notices within {@value FileStoreWait#PEER_CHECK_MILLIS} ms that a participant's process died
 * without closing, and fails naming its rank and pid; the host waits for CUDA events poll and check the same
 * way, since the event of a killed producer may never pass. The last participant to close removes the control
 * region and every data region; what a killed instance leaves behind is removed by
 * {@link org.dtorch.core.shm.ShmJanitor} when the next runtime starts.
 *
 * <p>Thread-safe: any participant may call any method concurrently; one instance belongs to one rank.
 */
public final class FileTensorStore extends TensorStore {
    private final String regionName;
    private final SharedRegion control;
    private final ShmMonitor monitor;
    private final FileStoreHeader header;
    private final FileStoreEntries entries;
    private final FileStorePeers peers;
    private final FileStoreWait waits;
    private final FileStoreDataRegions dataRegions;
    private final StoreGuard guard;
    /** True once this instance holds its rank's slot; a refused duplicate never touches the slot. Guarded by the monitor. */
    private boolean joined;
    /** What this rank lent and took through CUDA IPC. */
    private final FileStoreCudaExchanges cudaExchanges = new FileStoreCudaExchanges();

    /** Creates or joins the control region and waits for the others (constructor barrier). */
    FileTensorStore(TensorStoreCreateInfo info) {
        super(info);
        this.guard = StoreGuard.of(info);
        byte[] storeKeyBytes = utf8(info.storeKey());
        if (storeKeyBytes.length > MAX_STORE_KEY_BYTES) {
            throw new IllegalArgumentException("store key '" + info.storeKey() + "' is " + storeKeyBytes.length
                + " bytes; a File store key has at most " + MAX_STORE_KEY_BYTES);
        }
        if (info.worldSize() > MAX_WORLD_SIZE) {
            throw new IllegalArgumentException("store '" + info.storeKey() + "': a File store has at most " + MAX_WORLD_SIZE
                + " participants, got worldSize " + info.worldSize());
        }
        this.regionName = regionName(info.instanceId(), info.storeKey());
        this.dataRegions = new FileStoreDataRegions(regionName, info.rank());
        Deadline deadline = Deadline.after(timeout());
        this.control = FileStoreHeader.createOrJoin(regionName, info.storeKey(), info.worldSize(), info.rank(), deadline);
        MemorySegment seg = control.segment();
        this.monitor = new ShmMonitor(seg, MONITOR_OFFSET);
        this.header = new FileStoreHeader(seg);
        this.entries = new FileStoreEntries(seg);
        this.peers = new FileStorePeers(seg, info.worldSize());
        this.waits = new FileStoreWait(monitor, peers, CommOptions.global().spinBeforePark().toNanos(), guard::ensureOpen);
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
        return SharedRegion.PREFIX + instance + "-st-" + CommPaths.sha256Hex(storeKey).substring(0, 24);
    }

    /** The name of this store's control region; its data regions start with it. */
    public String regionName() {
        return regionName;
    }

    private void join() {
        monitor.lock();
        try {
            peers.join(rank(), storeKey());
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
                return peers.pids();
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public void srcSet(String key, Tensor value, DeviceStream stream, int getCount, DeviceKind destGetDeviceKind) {
        String op = guard.describe("srcSet", key);
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
            SharedRegion shared = dataRegions.allocatedRegionOf(value, nbytes);
            if (shared != null) {
                // Allocated in shared memory by this store: publish in place; consumers alias it.
                dataRegions.hold(key, value);
                try {
                    reserve(op, key, keyBytes, shape, dtype, nbytes, getCount, null, shared.name(),
                        TorchTensors.address(value) - shared.address(), flags, null);
                } catch (RuntimeException e) {
                    dataRegions.unhold(key);
                    throw e;
                }
                return;
            }
            int index = reserve(op, key, keyBytes, shape, dtype, nbytes, getCount, value, null, 0, flags, null);
            if (index < 0) {
                return; // inline: published already
            }
            FileStoreDataRegions.DataRegion data;
            try {
                data = dataRegions.dataRegionFor(nbytes);
                try {
                    ShmTensors.copyInto(value, data.region().segment());
                } catch (RuntimeException e) {
                    dataRegions.recycle(data);
                    throw e;
                }
            } catch (RuntimeException e) {
                monitor.lock();
                try {
                    entries.putStateRelease(index, FREE);
                    monitor.signalAll();
                } finally {
                    monitor.unlock();
                }
                throw e;
            }
            dataRegions.producing(key, data);
            monitor.lock();
            try {
                entries.dataSequence(index, data.sequence());
                entries.putStateRelease(index, LIVE);
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

    /**
     * Claims a free entry for {@code key} and fills its metadata. A value already in shared memory
     * ({@code dataName}), a small one (copied into the entry) or a lent CUDA one ({@code loan}, kept from here until
     * the key is waited for) is published at once (returns -1); a large one leaves the entry RESERVED (returns its
     * index) until its bytes are in a data region. {@code placement} is CUDA_IPC with {@code loan}, else DATA_REGION
     * or TO_CUDA (INLINE is decided here).
     */
    private int reserve(String op, String key, byte[] keyBytes, long[] shape, ScalarType dtype, long nbytes, int getCount,
                        Tensor value, String dataName, long dataOffset, int placement, CudaIpcTensors.Loan loan) {
        long keyHash = FileStoreEntries.hash(keyBytes);
        monitor.lock();
        try {
            guard.ensureOpen(op);
            int live = entries.find(keyBytes, keyHash, false);
            if (live >= 0) {
                throw new IllegalStateException(op + ": the key is still live (" + entries.counts(live)
                    + "); call srcWaitUntilGetFinished or reset() before setting it again");
            }
            int index = entries.freeSlot();
            if (index < 0) {
                throw new IllegalStateException(op + ": all " + ENTRY_CAPACITY + " entries of the store are live" + entries.keysHint()
                    + "; wait for some with srcWaitUntilGetFinished first");
            }
            boolean inline = dataName == null && loan == null && nbytes <= INLINE_CAPACITY;
            entries.fill(index, key, keyHash, getCount, rank(), dtype, shape, inline ? INLINE | placement : placement, nbytes,
                dataName == null ? "" : dataName, dataOffset);
            if (dataName != null || loan != null) {
                if (loan != null) {
                    // Kept under the monitor, as the entry goes LIVE: a loan is kept exactly while its key is live.
                    entries.putCudaIpc(index, loan.descriptor());
                    cudaExchanges.lent(key, loan);
                }
                entries.putStateRelease(index, LIVE);
                monitor.signalAll();
                return -1;
            }
            if (inline) {
                ShmTensors.copyInto(value, entries.inlineBytes(index));
                entries.putStateRelease(index, LIVE);
                monitor.signalAll();
                return -1;
            }
            entries.putStateRelease(index, RESERVED);
            return index;
        } finally {
            monitor.unlock();
        }
    }

    @Override
    public void srcWaitUntilGetFinished(String key, DeviceStream stream) {
        String op = guard.describe("srcWaitUntilGetFinished", key);
        byte[] keyBytes = checkKey(key, "srcWaitUntilGetFinished");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            long keyHash = FileStoreEntries.hash(keyBytes);
            FileStoreWait.Waiter waiter = waits.waiter(op, deadline);
            CudaIpcTensors.Loan loan;
            long traced = Tracer.now();
            monitor.lock();
            try {
                guard.ensureOpen(op);
                int index = entries.find(keyBytes, keyHash, false);
                if (index < 0) {
                    throw new IllegalStateException(op + ": the key is not live (never set, already waited for, or reset)");
                }
                int producer = entries.producer(index);
                if (producer != rank()) {
                    throw new IllegalStateException(op + ": the key was set by rank " + producer + "; only its producer waits for it");
                }
                while (entries.finishes(index) < entries.getCount(index)) {
                    waiter.step(() -> entries.finishes(index) + " of " + entries.getCount(index)
                        + " consumers finished (" + entries.gets(index) + " took the tensor)");
                }
                Tracer.storeWait("srcWaitUntilGetFinished", key, traced);
                loan = cudaExchanges.endLoan(key);
                entries.putStateRelease(index, FREE);
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
            dataRegions.finished(key);
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
        String op = guard.describe("destGet", key);
        byte[] keyBytes = checkKey(key, "destGet");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            long keyHash = FileStoreEntries.hash(keyBytes);
            FileStoreWait.Waiter waiter = waits.waiter(op, deadline);
            long[] shape;
            ScalarType dtype;
            int placement;
            String dataName = null;
            long dataOffset = 0;
            boolean cacheable = false;
            CudaIpcDescriptor cuda = null;
            Tensor inlineCopy = null;
            int index;
            long traced = Tracer.now();
            monitor.lock();
            try {
                while (true) {
                    guard.ensureOpen(op);
                    index = entries.find(keyBytes, keyHash, true);
                    if (index >= 0 && entries.gets(index) < entries.getCount(index)) {
                        break;
                    }
                    waiter.step(() -> {
                        int live = entries.find(keyBytes, keyHash, false);
                        return live < 0 ? "no producer set this key" + entries.keysHint()
                            : "the key is " + entries.counts(live) + "; no producer set it again";
                    });
                }
                Tracer.storeWait("destGet", key, traced);
                placement = entries.placement(index);
                if (placement == CUDA_IPC) {
                    cuda = entries.cudaIpc(index);
                    Cuda.require(Device.cuda(cuda.device())); // before taking: a consumer without that GPU takes nothing
                }
                entries.gets(index, entries.gets(index) + 1);
                shape = entries.shape(index);
                dtype = entries.dtype(op, index);
                if (placement == INLINE) {
                    return ShmTensors.copyOut(entries.inlineBytes(index), shape, dtype);
                }
                if (placement == (INLINE | TO_CUDA)) {
                    inlineCopy = ShmTensors.copyOut(entries.inlineBytes(index), shape, dtype);
                } else if (cuda == null) {
                    String allocated = entries.dataName(index);
                    cacheable = allocated.isEmpty();
                    dataName = cacheable ? dataRegions.dataRegionName(entries.producer(index), entries.dataSequence(index)) : allocated;
                    dataOffset = entries.dataOffset(index);
                }
            } finally {
                monitor.unlock();
            }
            if (cuda != null) {
                try {
                    return cudaExchanges.take(op, key, cuda, shape, dtype, stream, deadline, waits::awaitOnHost);
                } catch (RuntimeException e) {
                    untake(index);
                    throw e instanceof CommException ? e : new CommException(op + ": cannot take the CUDA value " + cuda + ": "
                        + e.getMessage(), e);
                }
            }
            Tensor value;
            try {
                value = inlineCopy != null ? inlineCopy : dataRegions.viewOf(dataName, dataOffset, cacheable, shape, dtype);
            } catch (RuntimeException e) {
                untake(index);
                throw new CommException(op + ": cannot map the value's data region " + dataName, e);
            }
            if ((placement & TO_CUDA) == 0 || stream.device().kind() != DeviceKind.CUDA) {
                return value; // a consumer on a CPU stream has no GPU to copy to: it takes the value as it is
            }
            try (Tensor onHost = value) {
                // Synchronous with the host (the source is pageable host memory): ready for any stream once it returns.
                return TorchTensors.to(onHost, stream.device());
            } catch (RuntimeException e) {
                untake(index);
                throw e;
            }
        } finally {
            exit();
        }
    }

    /** Gives back a take that failed after it was counted, so that another consumer can take the value. */
    private void untake(int index) {
        monitor.lock();
        try {
            entries.gets(index, entries.gets(index) - 1);
            monitor.signalAll();
        } finally {
            monitor.unlock();
        }
    }

    @Override
    public void destFinishGet(String key, DeviceStream stream) {
        String op = guard.describe("destFinishGet", key);
        byte[] keyBytes = checkKey(key, "destFinishGet");
        Objects.requireNonNull(stream, "stream");
        enter(op);
        try {
            if (cudaExchanges.hasTakes()) {
                cudaExchanges.finish(op, key, stream, timeout(), waits::awaitOnHost);
            }
            monitor.lock();
            try {
                guard.ensureOpen(op);
                int index = entries.find(keyBytes, FileStoreEntries.hash(keyBytes), true);
                if (index < 0) {
                    throw new IllegalStateException(op + ": no destGet of this key is outstanding (the key is not set)");
                }
                int finishes = entries.finishes(index);
                if (finishes >= entries.getCount(index)) {
                    throw new IllegalStateException(op + ": more finishes than getCount; the key is " + entries.counts(index));
                }
                if (finishes >= entries.gets(index)) {
                    throw new IllegalStateException(op + ": no destGet of this key is outstanding; the key is " + entries.counts(index));
                }
                entries.finishes(index, finishes + 1);
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public void reset() {
        barrier();
        enter("reset()");
        try {
            monitor.lock();
            try {
                guard.ensureOpen("reset()");
                entries.freeAll();
                monitor.signalAll();
            } finally {
                monitor.unlock();
            }
            dataRegions.reset();
            cudaExchanges.drop();
        } finally {
            exit();
        }
        barrier();
    }

    @Override
    public void barrier() {
        String op = guard.on("barrier()");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            FileStoreWait.Waiter waiter = waits.waiter(op, deadline);
            monitor.lock();
            try {
                guard.ensureOpen(op);
                int generation = header.barrierGeneration();
                int arrived = header.barrierArrived() + 1;
                if (arrived == worldSize()) {
                    header.barrierArrived(0);
                    header.barrierGeneration(generation + 1);
                    monitor.signalAll();
                    return;
                }
                header.barrierArrived(arrived);
                try {
                    while (header.barrierGeneration() == generation) {
                        guard.ensureOpen(op);
                        waiter.step(() -> header.barrierArrived() + " of " + worldSize() + " ranks arrived");
                    }
                } catch (RuntimeException e) {
                    if (header.barrierGeneration() == generation) {
                        // withdraw, so the barrier stays usable for the others
                        header.barrierArrived(header.barrierArrived() - 1);
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
        if (!guard.markClosed()) {
            return;
        }
        // A refused duplicate of an open rank must neither clear that rank's slot nor remove the live region.
        boolean last;
        monitor.lock();
        try {
            if (joined) {
                peers.leave(rank());
            }
            last = joined && peers.noOtherAlive(rank());
            monitor.signalAll();
        } finally {
            monitor.unlock();
        }
        dataRegions.close(last);
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
        return guard.isClosed();
    }

    /** Number of keys live (set and not yet waited for); for tests and diagnostics. */
    public int liveKeyCount() {
        enter("liveKeyCount()");
        try {
            monitor.lock();
            try {
                return entries.liveCount();
            } finally {
                monitor.unlock();
            }
        } finally {
            exit();
        }
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
            return dataRegions.allocate(shape, dtype);
        } finally {
            exit();
        }
    }

    // ---- bookkeeping ---------------------------------------------------------------------------------

    /** Holds the control mapping for the duration of one call, so that a concurrent close cannot unmap it. */
    private void enter(String op) {
        if (guard.isClosed() || !control.retain()) {
            throw guard.closedError(op);
        }
    }

    private void exit() {
        control.release();
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** {@link StoreGuard#checkKey}, then the key's length in the entry table; returns the key's UTF-8 bytes. */
    private byte[] checkKey(String key, String method) {
        guard.checkKey(key, method);
        byte[] bytes = utf8(key);
        if (bytes.length > MAX_KEY_BYTES) {
            throw new IllegalArgumentException(guard.describe(method, key) + ": a File store key has at most " + MAX_KEY_BYTES
                + " bytes, got " + bytes.length);
        }
        return bytes;
    }
}
