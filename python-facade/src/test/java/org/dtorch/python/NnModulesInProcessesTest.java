package org.dtorch.python;

import java.nio.file.Path;
import java.time.Duration;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * torch.nn modules with distributed parameters ({@code test_nn_distributed.py}) with every device a worker process: the
 * modules, the calls that torch hands to dtorch, and the seeded initialisations give the single-device results there
 * too. Every build runs the script in threads ({@link PythonScriptsTest}); this repeats it in processes.
 */
@Tag("multiprocess")
@Tag("slow")
class NnModulesInProcessesTest {

    @Test
    @Timeout(600)
    void shouldRunDistributedModulesWithWorkerProcesses() {
        PythonScriptsTest.runScript(Path.of("src/test/python/test_nn_distributed.py"),
            DTorchOptions.builder().devices(4).perDevicePerProcess(true).timeout(Duration.ofSeconds(120)).build());
    }
}
