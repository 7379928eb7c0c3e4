package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.MemoryStats;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Per-device memory statistics and the growth warning at syncs, on two devices in threads; {@link MemoryStatsInProcessesTest}
 * runs the same with worker processes. One runtime for the class (worker processes take seconds to start): each test
 * closes what it made, and only the growth test syncs.
 */
@Timeout(120)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MemoryStatsTest {
    /** Where the growth warning is logged (in this JVM in thread mode). */
    private static final Logger DEVICE_MEMORY_LOG = Logger.getLogger("org.dtorch.core.runtime.DeviceMemory");

    boolean processes() {
        return false;
    }

    private DTorch dt;

    @BeforeAll
    void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(processes()).timeout(Duration.ofSeconds(30))
            .memoryGrowthWarning(3, 200).build());
    }

    @AfterAll
    void stop() {
        dt.close();
    }

    @Test
    void shouldCountTheBytesOfTheTensorsMadeAndKeepThePeakAfterFrees() {
        assertEquals(0, dt.resetPeakMemoryStats(0).blobPeakBytes());
        assertEquals(0, dt.resetPeakMemoryStats(1).blobPeakBytes());
        DTensor a = dt.zeros(new long[] {6, 4}, dt.defaultMesh(), Placement.shard(0));                  // 3 x 4 float32 each: 48
        DTensor b = dt.ones(new long[] {5}, ScalarType.Long, dt.defaultMesh(), Placement.shard(0));    // 3 and 2 int64: 24, 16
        DTensor c = dt.full(1.5, new long[] {3}, ScalarType.Double, dt.defaultMesh());                 // 3 float64 each: 24
        MemoryStats first = dt.memoryStats(0);
        MemoryStats second = dt.memoryStats(1);
        assertEquals(new Device(dt.deviceKind(), 0), first.device());
        assertEquals(3, first.blobCount());
        assertEquals(96, first.blobLiveBytes());
        assertEquals(96, first.blobPeakBytes());
        assertEquals(3, second.blobCount());
        assertEquals(88, second.blobLiveBytes());
        assertEquals(0, first.cudaAllocatedBytes(), "a CPU device has no CUDA memory");
        if (processes()) {
            assertTrue(first.shmLiveBytes() > 0, "a worker maps at least the runtime's failure board: " + first);
        }

        DTensor big = dt.zeros(new long[] {2, 512}, dt.defaultMesh(), Placement.shard(0));              // 512 float32 each
        big.close();
        MemoryStats afterFree = dt.memoryStats(1);
        assertEquals(88, afterFree.blobLiveBytes());
        assertEquals(88 + 2048, afterFree.blobPeakBytes(), "the peak survives the free");

        MemoryStats reset = dt.resetPeakMemoryStats(1);
        assertEquals(88, reset.blobPeakBytes());
        DTensor d = dt.zeros(new long[] {4}, dt.defaultMesh());                                         // 16 each
        assertEquals(104, dt.memoryStats(1).blobPeakBytes());
        assertEquals(96 + 2048, dt.memoryStats(0).blobPeakBytes(), "resetting device 1 leaves device 0's peak");
        List.of(a, b, c, d).forEach(DTensor::close);
        assertEquals(0, dt.memoryStats(0).blobLiveBytes());
        assertThrows(IllegalArgumentException.class, () -> dt.memoryStats(2));
    }

    @Test
    void shouldWarnOncePerDeviceWhenTensorsGrowAtEverySyncAboveTheFloor() {
        List<String> warnings = new ArrayList<>();
        Handler handler = new Handler() {
            @Override
            public void publish(LogRecord record) {
                if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
                    synchronized (warnings) {
                        warnings.add(record.getMessage());
                    }
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        DEVICE_MEMORY_LOG.addHandler(handler);
        List<DTensor> kept = new ArrayList<>();
        try {
            for (int i = 0; i < 8; i++) { // steady: what is made is closed before the sync
                dt.zeros(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(0)).close();
                dt.sync();
            }
            assertEquals(0, dt.memoryStats(0).growthWarnings());
            // Leaking 32 bytes per device a step from 0: 32, 64, 96, ... each grow, but only 224, the 7th, reaches the floor.
            for (int i = 0; i < 7; i++) {
                kept.add(dt.zeros(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(0)));
                dt.sync();
                assertEquals(i < 6 ? 0 : 1, dt.memoryStats(1).growthWarnings(), "after sync " + (i + 1) + " of the leak");
            }
            for (int i = 0; i < 5; i++) {
                kept.add(dt.zeros(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(0)));
                dt.sync();
            }
            assertEquals(1, dt.memoryStats(0).growthWarnings());
            assertEquals(1, dt.memoryStats(1).growthWarnings());
            kept.forEach(DTensor::close);
        } finally {
            DEVICE_MEMORY_LOG.removeHandler(handler);
        }
        if (!processes()) { // a worker process logs to its own output, which the controller forwards
            synchronized (warnings) {
                assertEquals(2, warnings.size(), "one warning per device: " + warnings);
                for (int device = 0; device < 2; device++) {
                    String name = "cpu:" + device + ":";
                    assertTrue(warnings.stream().filter(w -> w.startsWith(name)).count() == 1, warnings.toString());
                }
                assertTrue(warnings.getFirst().contains("(bytes at each sync: 128, 160, 192, 224)"), warnings.getFirst());
            }
        }
    }
}
