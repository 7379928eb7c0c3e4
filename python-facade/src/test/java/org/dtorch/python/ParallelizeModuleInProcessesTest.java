package org.dtorch.python;

import java.nio.file.Path;
import java.time.Duration;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code test_parallelize_module.py} with every device a worker process: the styles' parameter distribution, input and
 * output moves and the plans' outputs hold when the shards live in other JVMs ({@link PythonScriptsTest} runs the script
 * in threads, in every build; this repeat of it in worker JVMs runs with the slow tests).
 */
@Tag("multiprocess")
@Tag("slow")
class ParallelizeModuleInProcessesTest {

    @Test
    @Timeout(900)
    void shouldParallelizeModulesWhoseShardsLiveInWorkerProcesses() {
        PythonScriptsTest.runScript(Path.of("src/test/python/test_parallelize_module.py"),
            DTorchOptions.builder().devices(4).perDevicePerProcess(true).timeout(Duration.ofSeconds(120)).build());
    }
}
