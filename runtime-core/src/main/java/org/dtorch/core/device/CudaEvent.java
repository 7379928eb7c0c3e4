package org.dtorch.core.device;

import java.util.Objects;
import org.bytedeco.pytorch.cuda.CUDAEvent;

/**
 * A c10 CUDA event of one device, created without timing (the cheapest kind), optionally interprocess.
 *
 * <p>Not thread-safe for {@link #record(DeviceStream)} and {@link #close()}: one owner records and closes.
 */
final class CudaEvent extends DeviceEvent {
    /** {@code cudaEventDisableTiming}. */
    static final int DISABLE_TIMING = 0x02;
    /** {@code cudaEventInterprocess}: the event can be shared with another process (needs DISABLE_TIMING). */
    static final int INTERPROCESS = 0x04;

    private final Device device;
    private final CUDAEvent event;
    private boolean closed;

    CudaEvent(Device device, boolean interprocess) {
        Cuda.require(device);
        this.device = device;
        this.event = new CUDAEvent(DISABLE_TIMING | (interprocess ? INTERPROCESS : 0));
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
        event.record(CudaStream.unwrap(stream, "stream"));
    }

    @Override
    public void streamWaitEvent(DeviceStream stream) {
        Objects.requireNonNull(stream, "stream");
        ensureOpen();
        if (stream.device().kind() == DeviceKind.CPU) {
            // CPU work runs on the host as soon as it is issued: the host itself must wait.
            event.synchronize();
            return;
        }
        // Waiting on an event of another GPU is allowed; c10 makes the stream's device current for the call.
        event.block(CudaStream.unwrap(stream, "stream"));
    }

    @Override
    public boolean query() {
        ensureOpen();
        return event.query();
    }

    @Override
    public void synchronize() {
        ensureOpen();
        event.synchronize();
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            event.close();
        }
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
        return "event(" + device + ")";
    }
}
