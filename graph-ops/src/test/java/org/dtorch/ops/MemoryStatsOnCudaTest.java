package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Memory statistics of CUDA devices: two ranks on {@code cuda:0}, in threads (one caching allocator for both) and in
 * worker processes (one each, and shards lent through CUDA IPC).
 */
@GpuTest
@Timeout(300)
class MemoryStatsOnCudaTest {

    private static DTorch start(boolean processes) {
        return DTorch.init(DTorchOptions.builder().devices("cuda:2").sameDevice(true).perDevicePerProcess(processes)
            .timeout(Duration.ofSeconds(60)).build());
    }

    /**
     * 256 float32 per rank: the caching allocator's figures hold at least those bytes; a freed MiB per rank stays in its
     * peak until the peak is reset.
     */
    private static void checkShardsAndAllocator(DTorch dt, int ranksPerAllocator) {
        DTensor x = dt.zeros(new long[] {2, 256}, dt.defaultMesh(), Placement.shard(0));
        dt.zeros(new long[] {2, 256 * 1024}, dt.defaultMesh(), Placement.shard(0)).close();
        dt.sync();
        MemoryStats stats = dt.memoryStats(0);
        assertEquals(1024, stats.blobLiveBytes(), stats.toString());
        assertTrue(stats.cudaAllocatedBytes() >= 1024L * ranksPerAllocator, stats.toString());
        assertTrue(stats.cudaReservedBytes() >= stats.cudaAllocatedBytes(), stats.toString());
        assertTrue(stats.cudaPeakAllocatedBytes() >= stats.cudaAllocatedBytes() + (1 << 20), stats.toString());
        MemoryStats reset = dt.resetPeakMemoryStats(0);
        assertTrue(reset.cudaPeakAllocatedBytes() < stats.cudaPeakAllocatedBytes(), "the freed MiB leaves the peak: " + reset);
        x.close();
    }

    @Test
    void shouldReportTheCachingAllocatorOfTheGpuInThreads() {
        try (DTorch dt = start(false)) {
            checkShardsAndAllocator(dt, 2);
        }
    }

    @Test
    @Tag("multiprocess")
    void shouldReportEachWorkersAllocatorAndItsCudaIpcMappings() {
        try (DTorch dt = start(true)) {
            checkShardsAndAllocator(dt, 1);
            // The same-device all-gather goes through File stores, which lend CUDA shards through CUDA IPC.
            DTensor x = dt.ones(new long[] {2, 256}, dt.defaultMesh(), Placement.shard(0));
            DTensor gathered = x.redistribute(Placement.replicate());
            dt.sync();
            for (int device = 0; device < 2; device++) {
                MemoryStats stats = dt.memoryStats(device);
                assertEquals(1024 + 2048, stats.blobLiveBytes(), stats.toString());
                assertTrue(stats.cudaIpcPeakBytes() > 0, "device " + device + " opened its peer's shard: " + stats);
            }
            gathered.close();
            x.close();
        }
    }
}
