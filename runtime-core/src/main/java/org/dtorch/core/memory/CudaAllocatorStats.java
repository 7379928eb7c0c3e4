package org.dtorch.core.memory;

import org.bytedeco.pytorch.cuda.CUDAAllocator;
import org.bytedeco.pytorch.cuda.DeviceStats;
import org.bytedeco.pytorch.global.torch_cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;

/**
 * What libtorch's CUDA caching allocator ({@code c10::cuda::CUDACachingAllocator}) of this process reports for one
 * GPU, summed over its small and large pools: bytes handed out to tensors ({@code allocated_bytes}) and bytes taken
 * from CUDA ({@code reserved_bytes}, the cache included), each now and at its peak. The allocator is one per process
 * and GPU: ranks that share a GPU in one process (same-device mode in threads) see the same numbers.
 *
 * <p>Thread-safe: immutable; the allocator synchronizes its own statistics.
 *
 * @param allocatedBytes     bytes of live allocations
 * @param peakAllocatedBytes the highest {@code allocatedBytes} since the start or the last peak reset
 * @param reservedBytes      bytes the allocator holds from CUDA
 * @param peakReservedBytes  the highest {@code reservedBytes} since the start or the last peak reset
 */
public record CudaAllocatorStats(long allocatedBytes, long peakAllocatedBytes, long reservedBytes, long peakReservedBytes) {
    /** What a device that is not a GPU reports. */
    public static final CudaAllocatorStats NONE = new CudaAllocatorStats(0, 0, 0, 0);

    /** The statistics of GPU {@code device} ({@link #NONE} for a CPU device); CUDA must be loaded for a GPU. */
    public static CudaAllocatorStats of(Device device) {
        if (device.kind() != DeviceKind.CUDA) {
            return NONE;
        }
        try (DeviceStats stats = allocator().getDeviceStats((byte) device.index())) {
            // Each field is an array over the pools, and the first entry is the sum over all of them.
            return new CudaAllocatorStats(stats.allocated_bytes().current(), stats.allocated_bytes().peak(),
                stats.reserved_bytes().current(), stats.reserved_bytes().peak());
        }
    }

    /** Starts the peaks of GPU {@code device} again from their current values; nothing for a CPU device. */
    public static void resetPeaks(Device device) {
        if (device.kind() == DeviceKind.CUDA) {
            allocator().resetPeakStats((byte) device.index());
        }
    }

    private static CUDAAllocator allocator() {
        return torch_cuda.getAllocator();
    }
}
