package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.dtorch.api.DTorch;

/**
 * Readings of a device's live tensor bytes for tests that measure what a step adds or frees. A tensor dropped without
 * being closed is freed by its cleaner at a time of the JVM's choosing; such a free must not fall inside a measured
 * window, so a test reads the bytes it starts from once collections stop changing them.
 */
final class SettledMemory {
    private static final int EQUAL_READINGS = 3;
    private static final long TIMEOUT_SECONDS = 60;

    private SettledMemory() {
    }

    /** Device {@code device}'s live bytes once {@value #EQUAL_READINGS} readings in a row, each after a collection, agree. */
    static long liveBytes(DTorch dt, int device) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
        List<Long> readings = new ArrayList<>();
        while (readings.size() < EQUAL_READINGS
            || readings.subList(readings.size() - EQUAL_READINGS, readings.size()).stream().distinct().count() > 1) {
            assertTrue(System.nanoTime() < deadline,
                () -> "device " + device + "'s live bytes did not settle in " + TIMEOUT_SECONDS + " s of collections: " + readings);
            System.gc();
            readings.add(dt.memoryStats(device).blobLiveBytes());
        }
        return readings.getLast();
    }
}
