package org.dtorch.core.communication.store;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.trace.Tracer;

/**
 * The {@link TensorStore} for participants that are threads of one process
 * (docs/communication-core.md, TensorStore).
 *
 * <p>All instances with the same store key share one {@link MemoryTensorStoreState} through a registry
 * of weak references; the first creator fixes the world size, and a rank already open is refused at
 * creation. Exchange is zero-copy: a consumer gets a new reference to the producer's tensor, never a copy.
 *
 * <p>Thread-safe: any participant may call any method concurrently.
 */
public final class MemoryTensorStore extends TensorStore {
    private final MemoryTensorStoreState state;
    private final long spinNanos;
    private final StoreGuard guard;

    /** Creates this participant's instance and waits for the others (constructor barrier). */
    MemoryTensorStore(TensorStoreCreateInfo info) {
        super(info);
        this.guard = StoreGuard.of(info);
        this.spinNanos = CommOptions.global().spinBeforePark().toNanos();
        this.state = MemoryTensorStoreRegistry.acquire(info.storeKey(), info.worldSize(), info.rank());
        try {
            barrier();
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    @Override
    public void srcSet(String key, Tensor value, DeviceStream stream, int getCount, DeviceKind destGetDeviceKind) {
        String op = guard.describe("srcSet", key);
        guard.checkKey(key, "srcSet");
        DeviceKind valueKind = checkSrcSet(op, value, stream, getCount);
        Tensor own = destGetDeviceKind == null || destGetDeviceKind == valueKind ? new Tensor(value)
            : moveForConsumers(op, value, destGetDeviceKind);
        // An idle stream has written the value already: an event never recorded counts as passed, so consumers skip
        // their waits and the producer's device gets no command.
        DeviceEvent setEvent = stream.query() ? DeviceEvent.create(stream.device()) : stream.recordEvent();
        try {
            state.srcSet(this, key, own, setEvent, getCount);
        } catch (RuntimeException e) {
            own.close();
            throw e;
        }
    }

    @Override
    public void srcWaitUntilGetFinished(String key, DeviceStream stream) {
        guard.checkKey(key, "srcWaitUntilGetFinished");
        Objects.requireNonNull(stream, "stream");
        // The producer's stream may reuse the memory only after every consumer's stream is done with it.
        long traced = Tracer.now();
        List<DeviceEvent> finished = state.srcWaitUntilGetFinished(this, key, Deadline.after(timeout()));
        Tracer.storeWait("srcWaitUntilGetFinished", key, traced);
        for (DeviceEvent event : finished) {
            event.streamWaitEvent(stream);
            event.close();
        }
    }

    @Override
    public Tensor destGet(String key, DeviceStream stream) {
        guard.checkKey(key, "destGet");
        Objects.requireNonNull(stream, "stream");
        long traced = Tracer.now();
        MemoryTensorStoreState.Taken taken = state.destGet(this, key, Deadline.after(timeout()));
        Tracer.storeWait("destGet", key, traced);
        taken.setEvent().streamWaitEvent(stream);
        return taken.tensor();
    }

    @Override
    public void destFinishGet(String key, DeviceStream stream) {
        guard.checkKey(key, "destFinishGet");
        Objects.requireNonNull(stream, "stream");
        DeviceEvent finished = stream.recordEvent();
        try {
            state.destFinishGet(this, key, finished);
        } catch (RuntimeException e) {
            finished.close();
            throw e;
        }
    }

    @Override
    public void reset() {
        barrier();
        state.clear();
        barrier();
    }

    @Override
    public void barrier() {
        state.barrier(this, Deadline.after(timeout()));
    }

    @Override
    public void close() {
        if (!guard.markClosed()) {
            return;
        }
        state.wakeAll();
        MemoryTensorStoreRegistry.release(state, rank());
    }

    /** True once {@link #close()} was called. */
    public boolean isClosed() {
        return guard.isClosed();
    }

    /** Number of keys live in the shared state; for tests and diagnostics. */
    public int liveKeyCount() {
        return state.liveKeyCount();
    }

    /** Number of values the shared state still references; for tests and diagnostics. */
    public int heldTensorCount() {
        return state.heldTensorCount();
    }

    /** Number of memory stores in this process that have a reachable shared state; for leak checks. */
    public static int liveStoreCount() {
        return MemoryTensorStoreRegistry.liveStoreCount();
    }

    long spinNanos() {
        return spinNanos;
    }

    /** Refuses {@code call} (a method and its key, without the store) once this instance is closed. */
    void ensureOpen(String call) {
        guard.ensureOpen(guard.on(call));
    }
}
