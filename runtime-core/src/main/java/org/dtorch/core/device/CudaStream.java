package org.dtorch.core.device;

import java.time.Duration;
import java.util.Objects;
import org.bytedeco.pytorch.cuda.CUDAStream;
import org.bytedeco.pytorch.global.torch_cuda;

/**
 * A c10 CUDA stream of one device.
 *
 * <p>Thread-safe: an immutable handle; the stream itself belongs to libtorch's pool (pool streams are
 * never destroyed, as in torch), so there is nothing to release.
 */
final class CudaStream extends DeviceStream {
    private final Device device;
    private final CUDAStream stream;

    private CudaStream(Device device, CUDAStream stream) {
        this.device = device;
        this.stream = stream;
    }

    /** The calling thread's current stream of {@code device}. */
    static CudaStream current(Device device) {
        Cuda.require(device);
        return new CudaStream(device, torch_cuda.getCurrentCUDAStream((byte) device.index()));
    }

    /** A stream from libtorch's pool of {@code device}, at normal priority. */
    static CudaStream fromPool(Device device) {
        Cuda.require(device);
        return new CudaStream(device, torch_cuda.getStreamFromPool(false, (byte) device.index()));
    }

    /** The libtorch stream, for the CUDA classes of this package and the collectives. */
    CUDAStream cudaStream() {
        return stream;
    }

    /** The libtorch stream of {@code stream}, which must be a CUDA stream. */
    static CUDAStream unwrap(DeviceStream stream, String what) {
        Objects.requireNonNull(stream, what);
        if (!(stream instanceof CudaStream cuda)) {
            throw new IllegalArgumentException(what + " must be a CUDA stream, got " + stream);
        }
        return cuda.stream;
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public void synchronize(Duration timeout) {
        DeviceWait.until(stream::query, timeout, () -> "synchronize of " + this);
    }

    @Override
    public boolean query() {
        return stream.query();
    }

    @Override
    public void makeCurrent() {
        torch_cuda.setCurrentCUDAStream(stream);
    }

    /** The stream's id within its device, as libtorch numbers it. */
    public long id() {
        return stream.id();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CudaStream other && other.device.equals(device) && other.stream.id() == stream.id();
    }

    @Override
    public int hashCode() {
        return device.hashCode() * 31 + Long.hashCode(stream.id());
    }

    @Override
    public String toString() {
        return "stream(" + device + ", " + stream.id() + ")";
    }
}
