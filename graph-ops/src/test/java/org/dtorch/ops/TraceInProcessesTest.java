package org.dtorch.ops;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The trace of {@link TraceTest}'s program with a worker process per device: the workers' parts merged on one clock. */
@Tag("multiprocess")
@Timeout(120)
class TraceInProcessesTest {
    @TempDir
    Path dir;

    @Test
    void shouldMergeTheWorkersTracesOnTheControllersClock() throws Exception {
        Path file = dir.resolve("trace.json");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(true).timeout(Duration.ofSeconds(30))
                .trace(file).build())) {
            TraceTest.runMatmulAndRedistribute(dt);
        }
        TraceTest.assertTraceOfMatmulAndRedistribute(file, 2);
        try (var left = Files.list(org.dtorch.core.shm.SharedRegion.directory())) {
            org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(),
                left.filter(p -> p.getFileName().toString().contains("-trace-")).toList(), "trace parts left behind");
        }
    }
}
