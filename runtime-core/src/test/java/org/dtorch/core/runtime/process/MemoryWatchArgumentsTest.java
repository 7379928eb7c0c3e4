package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.List;
import org.dtorch.core.device.Device;
import org.dtorch.core.runtime.MemoryWatch;
import org.dtorch.core.runtime.RuntimeOptions;
import org.junit.jupiter.api.Test;

/** A worker process watches its syncs with the runtime's {@link MemoryWatch}. */
class MemoryWatchArgumentsTest {

    private static MemoryWatch received(RuntimeOptions options) {
        List<String> args = WorkerPool.arguments(options, Device.cpu(1), "inst", "board", Path.of("/dev/shm/dtorch-test-ctl/sock"));
        return WorkerMain.memoryWatch(WorkerMain.parse(args.toArray(String[]::new)));
    }

    @Test
    void shouldHandTheRuntimesWatchToItsWorkers() {
        RuntimeOptions options = RuntimeOptions.defaults().withPerDevicePerProcess(true);
        assertEquals(MemoryWatch.DEFAULTS, received(options));
        assertEquals(new MemoryWatch(3, 200), received(options.withMemoryWatch(new MemoryWatch(3, 200))));
        assertEquals(MemoryWatch.OFF, received(options.withMemoryWatch(MemoryWatch.OFF)));
    }

    @Test
    void shouldRefuseNegativeSettings() {
        assertThrows(IllegalArgumentException.class, () -> new MemoryWatch(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> new MemoryWatch(1, -1));
    }
}
