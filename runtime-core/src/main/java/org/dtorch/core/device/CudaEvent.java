package org.dtorch.core.device;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.cuda.cudart.cudaIpcEventHandle_t;
import org.bytedeco.pytorch.cuda.CUDAEvent;

/**
 * A c10 CUDA event of one device, created without timing (the cheapest kind), optionally interprocess, or with timing
 * for {@link #elapsedNanos} ({@link #timed}).
 *
 * <p>Three origins: made here for this process ({@link #CudaEvent(Device, boolean)}), opened from another
 * process's handle ({@link #open}: waited for only), or borrowed, when the handle came from this very process
 * (CUDA does not open a process's own handles): then it is the exporter's event, and {@link #close()} leaves it
 * to its owner.
 *
 * <p>Not thread-safe for {@link #record(DeviceStream)} and {@link #close()}: one owner records and closes.
 */
final class CudaEvent extends DeviceEvent {
    /** {@code cudaEventDisableTiming}. */
    static final int DISABLE_TIMING = 0x02;
    /** {@code cudaEventInterprocess}: the event can be shared with another process (needs DISABLE_TIMING). */
    static final int INTERPROCESS = 0x04;
    /** {@code cudaEventDefault}: timing on (c10's own default is {@link #DISABLE_TIMING}). */
    static final int TIMING = 0x00;

    /** Interprocess events of this process whose handle was given out, by handle: what {@link #openIpc} borrows. */
    private static final Map<CudaIpcHandleKey, CudaEvent> EXPORTED = new ConcurrentHashMap<>();

    private final Device device;
    private final CUDAEvent event;
    private final boolean interprocess;
    /** Created with timing on ({@link #timed}): destroyed at close, never handed to plain events. */
    private final boolean timed;
    /** False for an event opened from a handle or borrowed: it is only waited for. */
    private final boolean recordable;
    /** False for a borrowed event: its exporter closes it. */
    private final boolean owner;
    private boolean recorded;
    private CudaIpcHandleKey exportedAs;
    /** Taken from the pool: given back, never closed. */
    private boolean pooled;
    private boolean closed;

    /**
     * Native plain events of closed owners, by device index, for the next plain event of that device:
     * creating and destroying one is two driver calls under the context's lock, where a reused one costs nothing.
     */
    private static final Map<Integer, ArrayDeque<CUDAEvent>> FREE_PLAIN = new ConcurrentHashMap<>();
    /** At most this many free native plain events are kept per device; the rest are destroyed. */
    private static final int FREE_PLAIN_LIMIT = 4096;

    CudaEvent(Device device, boolean interprocess) {
        this(device, interprocess, false);
    }

    private CudaEvent(Device device, boolean interprocess, boolean timed) {
        Cuda.require(device);
        this.device = device;
        this.event = timed ? new CUDAEvent(TIMING) : interprocess ? new CUDAEvent(DISABLE_TIMING | INTERPROCESS)
            : takeFreePlain(device.index());
        this.interprocess = interprocess;
        this.timed = timed;
        this.recordable = true;
        this.owner = true;
    }

    /** See {@link DeviceEvent#createTimed}. */
    static CudaEvent timed(Device device) {
        return new CudaEvent(device, false, true);
    }

    private CudaEvent(Device device, CUDAEvent event, boolean owner) {
        this.device = device;
        this.event = event;
        this.interprocess = true;
        this.timed = false;
        this.recordable = false;
        this.owner = owner;
    }

    /** An opened handle kept for its exporter's life: the 64 bytes, with value equality, and the exporter. */
    private record OpenedKey(int device, int exporterPid, CudaIpcHandleKey handle) {
    }

    /** Events opened from other processes' pooled handles, kept open ({@link DeviceEvent#openIpcCached}). */
    private static final Map<OpenedKey, CUDAEvent> OPENED = new ConcurrentHashMap<>();
    /** Free pooled interprocess events of this process, by device index ({@link DeviceEvent#takePooledInterprocess}). */
    private static final Map<Integer, ArrayDeque<CudaEvent>> POOL = new ConcurrentHashMap<>();

    static CudaEvent takePooled(Device device) {
        Cuda.require(device);
        ArrayDeque<CudaEvent> free = POOL.computeIfAbsent(device.index(), d -> new ArrayDeque<>());
        synchronized (free) {
            CudaEvent event = free.pollFirst();
            if (event != null) {
                return event;
            }
        }
        CudaEvent event = new CudaEvent(device, true);
        event.pooled = true;
        return event;
    }

    static void returnPooled(DeviceEvent event) {
        if (!(event instanceof CudaEvent cuda) || !cuda.pooled) {
            throw new IllegalArgumentException(event + " is not a pooled interprocess event");
        }
        ArrayDeque<CudaEvent> free = POOL.get(cuda.device.index());
        synchronized (free) {
            free.addFirst(cuda); // the most recently used first: its handle is the one consumers opened last
        }
    }

    static CudaEvent openCached(Device device, byte[] handle, int exporterPid) {
        CudaIpcHandleKey bytes = new CudaIpcHandleKey(device.index(), handle.clone());
        CudaEvent local = EXPORTED.get(bytes);
        if (local != null) {
            return new CudaEvent(device, local.event, false);
        }
        CUDAEvent opened = OPENED.computeIfAbsent(new OpenedKey(device.index(), exporterPid, bytes), k -> open(device, handle).event);
        return new CudaEvent(device, opened, false);
    }

    static int closeOpened(java.util.function.IntPredicate exited) {
        int closed = 0;
        for (var it = OPENED.entrySet().iterator(); it.hasNext(); ) {
            var entry = it.next();
            if (exited.test(entry.getKey().exporterPid())) {
                it.remove();
                entry.getValue().close();
                closed++;
            }
        }
        return closed;
    }

    /** See {@link DeviceEvent#openIpc}; arguments checked there. */
    static CudaEvent open(Device device, byte[] handle) {
        Cuda.require(device);
        CudaEvent local = EXPORTED.get(new CudaIpcHandleKey(device.index(), handle));
        if (local != null) {
            return new CudaEvent(device, local.event, false);
        }
        try (cudaIpcEventHandle_t struct = new cudaIpcEventHandle_t()) {
            MemorySegment.copy(handle, 0, segment(struct), ValueLayout.JAVA_BYTE, 0, IPC_HANDLE_BYTES);
            // c10's constructor guards the device and calls cudaIpcOpenEventHandle.
            return new CudaEvent(device, new CUDAEvent((byte) device.index(), struct), true);
        } catch (RuntimeException e) {
            throw new IllegalStateException("cannot open the interprocess event handle for " + device + " (its process closed the event, "
                + "or exited): " + e.getMessage(), e);
        }
    }

    /** The 64 bytes of a handle struct, in place. */
    private static MemorySegment segment(cudaIpcEventHandle_t handle) {
        return MemorySegment.ofAddress(handle.address()).reinterpret(IPC_HANDLE_BYTES);
    }

    /** The libtorch event, for IPC handles. */
    CUDAEvent cudaEvent() {
        return event;
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public void record(DeviceStream stream) {
        check(stream);
        if (!recordable) {
            throw new IllegalStateException(this + " was opened from another process's handle: it is waited for, never recorded");
        }
        event.record(CudaStream.unwrap(stream, "stream"));
        recorded = true;
    }

    @Override
    public byte[] ipcHandle() {
        ensureOpen();
        if (!interprocess || !recordable) {
            return super.ipcHandle();
        }
        if (!recorded) {
            throw new IllegalStateException(this + " has not been recorded: record it before handing out its handle");
        }
        if (exportedAs != null) {
            return exportedAs.bytes().clone(); // an event's handle does not change when it is recorded again
        }
        byte[] bytes = new byte[IPC_HANDLE_BYTES];
        try (cudaIpcEventHandle_t struct = new cudaIpcEventHandle_t()) {
            event.ipc_handle(struct);
            MemorySegment.copy(segment(struct), ValueLayout.JAVA_BYTE, 0, bytes, 0, IPC_HANDLE_BYTES);
        }
        if (exportedAs == null) {
            exportedAs = new CudaIpcHandleKey(device.index(), bytes.clone());
            EXPORTED.put(exportedAs, this);
        }
        return bytes;
    }

    @Override
    public void streamWaitEvent(DeviceStream stream) {
        Objects.requireNonNull(stream, "stream");
        ensureOpen();
        if (stream.device().kind() == DeviceKind.CPU) {
            // CPU work runs on the host as soon as it is issued: the host itself must wait.
            synchronize();
            return;
        }
        if (notRecordedHere()) {
            return; // nothing recorded: nothing to wait for (as c10 does for an event it has not created yet)
        }
        // Waiting on an event of another GPU is allowed; c10 makes the stream's device current for the call.
        event.block(CudaStream.unwrap(stream, "stream"));
    }

    @Override
    public boolean query() {
        ensureOpen();
        return notRecordedHere() || event.query();
    }

    @Override
    public void synchronize(Duration timeout) {
        ensureOpen();
        if (!notRecordedHere()) {
            DeviceWait.until(event::query, timeout, () -> "synchronize of " + this);
        }
    }

    @Override
    public long elapsedNanos(DeviceEvent end) {
        ensureOpen();
        if (!timed || !(end instanceof CudaEvent other) || !other.timed) {
            return super.elapsedNanos(end);
        }
        if (!recorded || !other.recorded) {
            throw new IllegalStateException("elapsedNanos from " + this + " to " + end + ": both must be recorded first");
        }
        // c10 checks that both completed; the float is milliseconds, resolved to about half a microsecond.
        return Math.round(event.elapsed_time(other.event) * 1.0e6);
    }

    @Override
    public boolean hasRecord() {
        return !notRecordedHere();
    }

    /** True for an event of this process not recorded yet: a reused native event still holds its last owner's record. */
    private boolean notRecordedHere() {
        return recordable && !recorded;
    }

    @Override
    public void close() {
        if (closed || pooled) {
            return; // a pooled event lives as long as the process: consumers may keep its handle open
        }
        closed = true;
        if (exportedAs != null) {
            EXPORTED.remove(exportedAs, this);
        }
        if (owner && !interprocess && !timed) {
            giveBackPlain(device.index(), event);
        } else if (owner) {
            event.close();
        }
    }

    private static CUDAEvent takeFreePlain(int deviceIndex) {
        ArrayDeque<CUDAEvent> free = FREE_PLAIN.get(deviceIndex);
        if (free != null) {
            synchronized (free) {
                CUDAEvent reused = free.pollFirst();
                if (reused != null) {
                    return reused;
                }
            }
        }
        return new CUDAEvent(DISABLE_TIMING);
    }

    private static void giveBackPlain(int deviceIndex, CUDAEvent event) {
        ArrayDeque<CUDAEvent> free = FREE_PLAIN.computeIfAbsent(deviceIndex, d -> new ArrayDeque<>());
        synchronized (free) {
            if (free.size() < FREE_PLAIN_LIMIT) {
                free.addFirst(event);
                return;
            }
        }
        event.close();
    }

    private void check(DeviceStream stream) {
        Objects.requireNonNull(stream, "stream");
        ensureOpen();
        if (!stream.device().equals(device)) {
            throw new IllegalArgumentException("event of " + device + " recorded on " + stream);
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("event of " + device + " is closed");
        }
    }

    @Override
    public String toString() {
        return (interprocess ? "interprocess event(" : timed ? "timed event(" : "event(") + device + ")";
    }
}
