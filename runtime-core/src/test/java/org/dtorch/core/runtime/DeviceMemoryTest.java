package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The growth watch's rule on one device's blob table, sync by sync, without a runtime. */
@Timeout(30)
class DeviceMemoryTest {
    private final BlobTable blobs = new BlobTable();
    private long nextId;

    @BeforeAll
    static void loadNatives() {
        Cuda.loadNatives();
    }

    /** Holds {@code floats} more float32 values (4 bytes each). */
    private void hold(int floats) {
        blobs.put(nextId++, torch.zeros(floats));
    }

    private static DeviceMemory watching(BlobTable blobs, int syncs, long floor) {
        return new DeviceMemory(Device.cpu(0), Device.cpu(0), blobs, new MemoryWatch(syncs, floor));
    }

    @Test
    void shouldWarnAtTheNthConsecutiveGrowthOnlyOnce() {
        DeviceMemory memory = watching(blobs, 3, 0);
        memory.atSync();                                 // 0 bytes: the first sample
        for (int growth = 1; growth <= 3; growth++) {
            hold(1);
            memory.atSync();
            assertEquals(growth < 3 ? 0 : 1, memory.stats().growthWarnings(), "after growth " + growth);
        }
        hold(1);
        memory.atSync();
        assertEquals(1, memory.stats().growthWarnings());
        assertEquals(16, memory.stats().blobLiveBytes());
        blobs.clear();
    }

    @Test
    void shouldStartCountingAgainAfterASyncWithoutGrowth() {
        DeviceMemory memory = watching(blobs, 3, 0);
        hold(1);
        memory.atSync();
        hold(1);
        memory.atSync();
        hold(1);
        memory.atSync();                                 // two growths
        memory.atSync();                                 // the same bytes: not a growth
        hold(1);
        memory.atSync();
        hold(1);
        memory.atSync();                                 // two growths again
        assertEquals(0, memory.stats().growthWarnings());
        hold(1);
        memory.atSync();
        assertEquals(1, memory.stats().growthWarnings());
        blobs.clear();
    }

    @Test
    void shouldWaitForTheFloorAndNeverWarnWhenOff() {
        DeviceMemory belowFloor = watching(blobs, 2, 40);
        DeviceMemory off = watching(blobs, 0, 0);
        for (int i = 0; i < 10; i++) {
            hold(1);                                     // 4, 8, ... 40 bytes
            belowFloor.atSync();
            off.atSync();
            assertEquals(i < 9 ? 0 : 1, belowFloor.stats().growthWarnings(), "at " + blobs.bytes().live() + " bytes");
        }
        assertEquals(0, off.stats().growthWarnings());
        assertEquals(40, blobs.bytes().peak());
        blobs.release(0);
        assertEquals(36, blobs.bytes().live());
        assertEquals(40, blobs.bytes().peak());
        blobs.clear();
    }
}
