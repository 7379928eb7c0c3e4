package org.dtorch.core.device;

import java.util.Objects;

/**
 * A marker in a {@link DeviceStream}: once recorded, other streams can wait for the work before it
 * (the seed's {@code DeviceEvent}, a CUDA event on GPUs).
 *
 * <p>On CPU the work before an event has always finished when {@link #record(DeviceStream)} returns,
 * so {@link #query()} is true and the waits return at once. On CUDA it is a c10 CUDA event without
 * timing; {@link #streamWaitEvent(DeviceStream)} makes the other stream wait on the device, not the host.
 *
 * <p>Ownership: {@link #close()} releases a CUDA event (the garbage collector does it otherwise).
 *
 * <p>Not thread-safe for {@link #record(DeviceStream)}: one thread records; any thread may query or wait
 * after the recording thread has published the event.
 */
public abstract sealed class DeviceEvent implements AutoCloseable permits DeviceEvent.CpuEvent, CudaEvent {

    DeviceEvent() {
    }

    /**
     * A new, unrecorded event for a device.
     *
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     */
    public static DeviceEvent create(Device device) {
        Objects.requireNonNull(device, "device");
        return switch (device.kind()) {
            case CPU -> new CpuEvent(device);
            case CUDA -> new CudaEvent(device, false);
        };
    }

    /** The device of this event. */
    public abstract Device device();

    /** Marks the current end of {@code stream}. */
    public abstract void record(DeviceStream stream);

    /** Makes {@code stream} wait for the recorded work before running anything issued later (StreamWaitEvent). */
    public abstract void streamWaitEvent(DeviceStream stream);

    /** True when the recorded work has finished. */
    public abstract boolean query();

    /** Blocks the calling thread until the recorded work has finished. */
    public abstract void synchronize();

    /** Releases the native event. Idempotent. */
    @Override
    public void close() {
    }

    /** A CPU event: the recorded work is always complete. */
    static final class CpuEvent extends DeviceEvent {
        private final Device device;

        CpuEvent(Device device) {
            this.device = device;
        }

        @Override
        public Device device() {
            return device;
        }

        @Override
        public void record(DeviceStream stream) {
            Objects.requireNonNull(stream, "stream");
        }

        @Override
        public void streamWaitEvent(DeviceStream stream) {
            Objects.requireNonNull(stream, "stream");
        }

        @Override
        public boolean query() {
            return true;
        }

        @Override
        public void synchronize() {
        }
    }
}
