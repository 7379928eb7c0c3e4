package org.dtorch.core.device;

import java.time.Duration;
import java.util.Objects;

/**
 * An ordered queue of work on one device (DTorch's {@code DeviceStream}).
 *
 * <p>On CPU, work runs synchronously on the thread that issues it, so a CPU stream only carries its
 * device and {@link #synchronize()} returns at once. On CUDA it is a c10 CUDA stream: libtorch issues the
 * work of the calling thread to the thread's current stream of the tensor's device, so a device worker
 * {@link #create(Device) creates} its own stream and {@link #makeCurrent() makes it current} once.
 *
 * <p>Thread-safe: streams are immutable handles; issuing work to one stream from several threads
 * follows the device's own rules.
 */
public abstract sealed class DeviceStream permits DeviceStream.CpuStream, CudaStream {

    DeviceStream() {
    }

    /**
     * The stream the calling thread issues work to on {@code device}: on CUDA the thread's current stream
     * (the default stream unless {@link #makeCurrent()} chose another).
     *
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     */
    public static DeviceStream of(Device device) {
        Objects.requireNonNull(device, "device");
        return switch (device.kind()) {
            case CPU -> new CpuStream(device);
            case CUDA -> CudaStream.current(device);
        };
    }

    /**
     * A stream of its own for a device worker: on CUDA a stream from libtorch's pool, on CPU the CPU stream.
     *
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     */
    public static DeviceStream create(Device device) {
        Objects.requireNonNull(device, "device");
        return switch (device.kind()) {
            case CPU -> new CpuStream(device);
            case CUDA -> CudaStream.fromPool(device);
        };
    }

    /** The device this stream belongs to. */
    public abstract Device device();

    /**
     * Blocks until all work issued to this stream so far has finished, at most
     * {@code -Ddtorch.device.syncTimeoutSeconds} (300 s).
     *
     * @throws DeviceTimeoutException when the work has not finished by then, naming the stream
     */
    public void synchronize() {
        synchronize(DeviceWait.defaultTimeout());
    }

    /**
     * Blocks until all work issued to this stream so far has finished, at most {@code timeout}.
     *
     * @throws DeviceTimeoutException when the work has not finished by then, naming the stream
     * @throws IllegalStateException  when the calling thread is interrupted while it waits
     */
    public abstract void synchronize(Duration timeout);

    /** Makes this the calling thread's current stream of its device, where libtorch issues the thread's work. */
    public abstract void makeCurrent();

    /** True when all work issued to this stream so far has finished (always on CPU). Does not block. */
    public abstract boolean query();

    /** Records a new event at the current end of this stream. */
    public DeviceEvent recordEvent() {
        DeviceEvent event = DeviceEvent.create(device());
        event.record(this);
        return event;
    }

    /** The default stream of a CPU device: an ordering no-op. */
    static final class CpuStream extends DeviceStream {
        private final Device device;

        CpuStream(Device device) {
            this.device = device;
        }

        @Override
        public Device device() {
            return device;
        }

        @Override
        public void synchronize(Duration timeout) {
            // CPU work is synchronous on the issuing thread: nothing is pending.
        }

        @Override
        public void makeCurrent() {
            // CPU work runs on the issuing thread.
        }

        @Override
        public boolean query() {
            return true;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof CpuStream other && other.device.equals(device);
        }

        @Override
        public int hashCode() {
            return device.hashCode();
        }

        @Override
        public String toString() {
            return "stream(" + device + ", default)";
        }
    }
}
