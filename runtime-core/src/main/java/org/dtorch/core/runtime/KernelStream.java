package org.dtorch.core.runtime;

import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * The stream a device's kernels run on, one per device (DTorch's {@code KernelStream}). On CPU kernels run
 * synchronously on the worker thread; on CUDA it is a stream of the worker's own from libtorch's pool, made
 * the worker thread's current stream by {@link #bindToThisThread()}, so that every libtorch call of the
 * worker is issued to it.
 *
 * <p>Not thread-safe: owned by one worker.
 */
final class KernelStream {
    private final DeviceStream stream;

    /** A stream on {@code physical}, the device that runs the kernels (see {@link RuntimeOptions#physicalDevice}). */
    KernelStream(Device physical) {
        this.stream = DeviceStream.create(physical);
    }

    DeviceStream stream() {
        return stream;
    }

    /** Makes the stream's device and the stream itself current for the calling (worker) thread. */
    void bindToThisThread() {
        Cuda.setCurrentDevice(stream.device());
        stream.makeCurrent();
    }

    void synchronize() {
        stream.synchronize();
    }
}
