package org.dtorch.core.runtime;

import java.util.StringJoiner;
import org.dtorch.core.device.Device;
import org.dtorch.core.memory.CudaAllocatorStats;
import org.dtorch.core.memory.ProcessMemory;

/**
 * One device's memory accounting, on its worker thread: the {@link MemoryStats} the device reports, its peak resets,
 * and the {@link MemoryWatch} over the bytes of its tensors at every sync. The worker binds it to its thread, where the
 * runtime's memory and sync operators find it ({@link #current()}).
 *
 * <p>Not thread-safe: owned by the device's worker thread.
 */
final class DeviceMemory {
    private static final System.Logger LOG = System.getLogger(DeviceMemory.class.getName());
    private static final ThreadLocal<DeviceMemory> CURRENT = new ThreadLocal<>();

    private final Device device;
    private final Device physical;
    private final BlobTable blobs;
    private final MemoryWatch watch;
    /** The bytes at the last syncs, a ring of {@code growthSyncs + 1}. */
    private final long[] atSyncs;
    private long syncs;
    private int growths;
    private boolean warned;

    DeviceMemory(Device device, Device physical, BlobTable blobs, MemoryWatch watch) {
        this.device = device;
        this.physical = physical;
        this.blobs = blobs;
        this.watch = watch;
        this.atSyncs = new long[watch.growthSyncs() + 1];
    }

    /** Makes this the calling thread's device memory. */
    void bindToThisThread() {
        CURRENT.set(this);
    }

    /** The calling thread's device memory, or null on a thread that runs no device. */
    static DeviceMemory current() {
        return CURRENT.get();
    }

    /** The device's memory now. */
    MemoryStats stats() {
        CudaAllocatorStats cuda = CudaAllocatorStats.of(physical);
        return new MemoryStats(device, blobs.size(), blobs.bytes().live(), blobs.bytes().peak(), ProcessMemory.SHARED_REGIONS.live(),
            ProcessMemory.SHARED_REGIONS.peak(), ProcessMemory.CUDA_IPC_MAPPINGS.live(), ProcessMemory.CUDA_IPC_MAPPINGS.peak(),
            cuda.allocatedBytes(), cuda.peakAllocatedBytes(), cuda.reservedBytes(), cuda.peakReservedBytes(), warned ? 1 : 0,
            ProcessMemory.FILE_MAPPINGS.live(), ProcessMemory.FILE_MAPPINGS.peak());
    }

    /** Starts every peak again from its live value (the process-wide ones for every device of the process). */
    void resetPeaks() {
        blobs.bytes().resetPeak();
        ProcessMemory.SHARED_REGIONS.resetPeak();
        ProcessMemory.CUDA_IPC_MAPPINGS.resetPeak();
        ProcessMemory.FILE_MAPPINGS.resetPeak();
        CudaAllocatorStats.resetPeaks(physical);
    }

    /** The device reached a sync: samples the bytes of its tensors and warns once if they grew as {@link MemoryWatch} says. */
    void atSync() {
        long bytes = blobs.bytes().live();
        growths = syncs > 0 && bytes > atSyncs[(int) ((syncs - 1) % atSyncs.length)] ? growths + 1 : 0;
        atSyncs[(int) (syncs % atSyncs.length)] = bytes;
        syncs++;
        if (!warned && watch.growthSyncs() > 0 && growths >= watch.growthSyncs() && bytes >= watch.floorBytes()) {
            warned = true;
            LOG.log(System.Logger.Level.WARNING, growthMessage());
        }
    }

    private String growthMessage() {
        StringJoiner history = new StringJoiner(", ");
        for (long s = syncs - atSyncs.length; s < syncs; s++) {
            history.add(Long.toString(atSyncs[(int) (s % atSyncs.length)]));
        }
        return device + ": the tensors it holds grew at each of the last " + watch.growthSyncs() + " syncs (bytes at each sync: "
            + history + "); the program may keep tensors it no longer uses: close them, or drop their handles. Warned once per "
            + "device, after " + watch.growthSyncs() + " growths ending at " + watch.floorBytes() + " bytes or more (MemoryWatch)";
    }
}
