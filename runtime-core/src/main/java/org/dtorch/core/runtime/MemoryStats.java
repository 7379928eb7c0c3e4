package org.dtorch.core.runtime;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.memory.CudaAllocatorStats;
import org.dtorch.core.memory.ProcessMemory;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One device's memory, as its worker saw it when it ran the query: after everything queued to the device before the
 * query, as {@code sync()} means, so that exact figures can be compared. Peaks are since the runtime started or the
 * last {@code resetPeakMemoryStats} of the device.
 *
 * <p>Thread-safe: immutable.
 *
 * @param device                 the device (logical, as the runtime names it)
 * @param blobCount              tensors the device holds for the client's operands
 * @param blobLiveBytes          their bytes ({@code nbytes} of each local shard; views of one storage each counted whole)
 * @param blobPeakBytes          the highest {@code blobLiveBytes}
 * @param shmLiveBytes           bytes of shared-memory regions mapped by the process that runs the device
 *                               ({@link ProcessMemory#SHARED_REGIONS}): the device's own in per-device-process mode,
 *                               shared by every device in thread mode
 * @param shmPeakBytes           the highest {@code shmLiveBytes}
 * @param cudaIpcLiveBytes       bytes of other processes' CUDA allocations that process has opened through CUDA IPC
 * @param cudaIpcPeakBytes       the highest {@code cudaIpcLiveBytes}
 * @param cudaAllocatedBytes     the CUDA caching allocator's live allocations on the device's GPU, in that process
 *                               ({@link CudaAllocatorStats}); 0 on a CPU device
 * @param cudaPeakAllocatedBytes the highest {@code cudaAllocatedBytes}
 * @param cudaReservedBytes      bytes the allocator holds from CUDA on that GPU (its cache included)
 * @param cudaPeakReservedBytes  the highest {@code cudaReservedBytes}
 * @param growthWarnings         1 once the device warned that its tensors grow at every sync ({@link MemoryWatch}), else 0
 * @param fileMappedLiveBytes    bytes of files that process has mapped to read or write tensors
 *                               ({@link ProcessMemory#FILE_MAPPINGS}: safetensors loads and saves), not unmapped yet
 * @param fileMappedPeakBytes    the highest {@code fileMappedLiveBytes}
 */
public record MemoryStats(Device device, long blobCount, long blobLiveBytes, long blobPeakBytes, long shmLiveBytes, long shmPeakBytes,
                          long cudaIpcLiveBytes, long cudaIpcPeakBytes, long cudaAllocatedBytes, long cudaPeakAllocatedBytes,
                          long cudaReservedBytes, long cudaPeakReservedBytes, long growthWarnings, long fileMappedLiveBytes,
                          long fileMappedPeakBytes) {

    /**
     * The keys of {@link #asMap()}, in the order of the components after {@code device}: the names of Python's
     * {@code dtorch.memory_stats(device)}.
     */
    public static final List<String> KEYS = List.of("blobs.count", "blobs.live_bytes", "blobs.peak_bytes", "shm.live_bytes",
        "shm.peak_bytes", "cuda_ipc.live_bytes", "cuda_ipc.peak_bytes", "cuda.allocated_bytes", "cuda.peak_allocated_bytes",
        "cuda.reserved_bytes", "cuda.peak_reserved_bytes", "sync.growth_warnings", "mapped_files.live_bytes", "mapped_files.peak_bytes");

    /** Validates the device. */
    public MemoryStats {
        Objects.requireNonNull(device, "device");
    }

    /** The statistics of {@code device} from {@code values}, in the order of {@link #KEYS}. */
    public static MemoryStats of(Device device, long[] values) {
        if (values.length != KEYS.size()) {
            throw new IllegalArgumentException("memory statistics: expected " + KEYS.size() + " values, got " + values.length);
        }
        return new MemoryStats(device, values[0], values[1], values[2], values[3], values[4], values[5], values[6], values[7],
            values[8], values[9], values[10], values[11], values[12], values[13]);
    }

    /** The statistics of {@code device} from the int64 tensor {@link #toTensor()} made. */
    public static MemoryStats of(Device device, Tensor values) {
        if (TorchTensors.dtype(values) != ScalarType.Long || values.numel() != KEYS.size() || values.is_cuda()) {
            throw new IllegalArgumentException("memory statistics: expected a host int64 tensor of " + KEYS.size() + " values, got "
                + TorchTensors.describe(values));
        }
        long[] read = new long[KEYS.size()];
        try (Tensor contiguous = values.contiguous()) {
            new LongPointer(contiguous.data_ptr()).capacity(read.length).get(read);
        }
        return of(device, read);
    }

    /** The values as a host int64 tensor in the order of {@link #KEYS}, for a promise; the caller owns it. */
    public Tensor toTensor() {
        long[] values = values();
        try (TensorOptions options = TorchTensors.options(ScalarType.Long, Device.cpu(0))) {
            Tensor t = torch.zeros(new long[] {values.length}, options);
            new LongPointer(t.data_ptr()).capacity(values.length).put(values);
            return t;
        }
    }

    /** The values in the order of {@link #KEYS}. */
    public long[] values() {
        return new long[] {blobCount, blobLiveBytes, blobPeakBytes, shmLiveBytes, shmPeakBytes, cudaIpcLiveBytes, cudaIpcPeakBytes,
            cudaAllocatedBytes, cudaPeakAllocatedBytes, cudaReservedBytes, cudaPeakReservedBytes, growthWarnings, fileMappedLiveBytes,
            fileMappedPeakBytes};
    }

    /** The values by {@link #KEYS}, in that order. */
    public Map<String, Long> asMap() {
        long[] values = values();
        Map<String, Long> map = new LinkedHashMap<>();
        for (int i = 0; i < values.length; i++) {
            map.put(KEYS.get(i), values[i]);
        }
        return map;
    }
}
