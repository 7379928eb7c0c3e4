package org.dtorch.core.runtime;

import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * The stream a device's kernels run on, one per device (the seed's {@code KernelStream}). On CPU kernels run
 * synchronously on the worker thread; on GPUs this will be the worker's CUDA stream.
 *
 * <p>Not thread-safe: owned by one worker.
 */
final class KernelStream {
    private final DeviceStream stream;

    KernelStream(Device device) {
        this.stream = DeviceStream.of(device);
    }

    DeviceStream stream() {
        return stream;
    }

    void synchronize() {
        stream.synchronize();
    }
}
