package org.dtorch.core.device;

import java.util.Objects;

/**
 * An ordered queue of work on one device (the seed's {@code DeviceStream}).
 *
 * <p>{@link #of(Device)} gives the device's default stream. On CPU, work runs synchronously on the
 * thread that issues it, so a CPU stream only carries its device and {@link #synchronize()} returns
 * at once. The GPU implementation (a CUDA stream) arrives with the GPU issue; until then
 * {@link #of(Device)} rejects GPU devices with an {@link UnsupportedOperationException}.
 *
 * <p>Thread-safe: streams are immutable handles; issuing work to one stream from several threads
 * follows the device's own rules.
 */
public abstract sealed class DeviceStream permits DeviceStream.CpuStream {

    private DeviceStream() {
    }

    /**
     * The default stream of a device.
     *
     * @throws UnsupportedOperationException for a GPU device, until the GPU backend is built
     */
    public static DeviceStream of(Device device) {
        Objects.requireNonNull(device, "device");
        return switch (device.kind()) {
            case CPU -> new CpuStream(device);
            case GPU -> throw new UnsupportedOperationException(
                "GPU streams are not built yet: CUDA streams, events and NCCL come with the GPU issue (asked for "
                    + device + ")");
        };
    }

    /** The device this stream belongs to. */
    public abstract Device device();

    /** Blocks until all work issued to this stream so far has finished. */
    public abstract void synchronize();

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
        public void synchronize() {
            // CPU work is synchronous on the issuing thread: nothing is pending.
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
