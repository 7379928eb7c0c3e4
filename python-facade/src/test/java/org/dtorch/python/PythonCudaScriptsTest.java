package org.dtorch.python;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * The Python facade on CUDA: every {@code src/test/python/cuda/test_*.py} under GraalPy, each on a runtime of four
 * ranks sharing {@code cuda:0} ({@code devices("cuda:4").sameDevice(true)}), the way {@link PythonScriptsTest} runs
 * the CPU scripts: meshes with repeated GPU ids, factories, operators, collectives, values back on the host.
 */
@GpuTest
class PythonCudaScriptsTest {
    private static final String SCRIPTS = "python-facade/src/test/python/cuda";

    @TestFactory
    @Timeout(600)
    Stream<DynamicTest> cudaScripts() throws IOException {
        List<Path> scripts;
        try (Stream<Path> files = Files.list(RepositoryPaths.resolve(SCRIPTS))) {
            scripts = files.filter(p -> p.getFileName().toString().matches("test_.*\\.py")).sorted().toList();
        }
        DTorchOptions options = DTorchOptions.builder().devices("cuda:4").sameDevice(true).timeout(Duration.ofSeconds(60)).build();
        return scripts.stream().map(script -> DynamicTest.dynamicTest(script.getFileName().toString(),
            () -> PythonScriptsTest.runScript(script, options)));
    }
}
