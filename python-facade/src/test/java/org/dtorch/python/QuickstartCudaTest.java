package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The README's GPU command, {@code ./dtorch run --devices cuda:4 --same-device examples/python/quickstart.py}, through
 * the launcher's main in this JVM (the launcher's flags, the runtime on four ranks of {@code cuda:0}, GraalPy, the
 * script): it must print the CUDA mesh and the losses plain torch computes on the CPU from the same seeded draws.
 */
@GpuTest
class QuickstartCudaTest {
    private static final String SCRIPT = "examples/python/quickstart.py";

    @Test
    @Timeout(600)
    void shouldRunTheQuickstartOnFourRanksOfOneGpuAndPrintTheLossesOfPlainTorch() throws IOException {
        Path script = RepositoryPaths.resolve(SCRIPT);
        assertTrue(Files.isReadable(script), "no " + script);
        Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir")));
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream originalOut = System.out;
        PrintStream originalErr = System.err;
        int status;
        try (PrintStream capture = new PrintStream(captured, true, StandardCharsets.UTF_8)) {
            System.setOut(capture);
            System.setErr(capture);
            status = Launcher.run(new String[] {"run", "--devices", "cuda:4", "--same-device", script.toString()});
        } finally {
            System.setOut(originalOut);
            System.setErr(originalErr);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, "./dtorch run --devices cuda:4 --same-device " + SCRIPT + " failed:\n" + out);
        assertTrue(out.contains("mesh: DeviceMesh(cuda, [[0, 1], [2, 3]], dims=[dp, tp])"), out);
        assertTrue(out.contains("y (partial over tp): (Shard(dim=0), Partial(sum))"), out);
        double[] expected = QuickstartTest.lossesOfPlainTorch();
        assertEquals(expected[0], QuickstartTest.printed(out, "loss before the step:"), 2e-6 + 1e-5 * expected[0], out);
        assertEquals(expected[1], QuickstartTest.printed(out, "loss after the step:"), 2e-6 + 1e-5 * expected[1], out);
        assertTrue(out.lines().anyMatch("OK"::equals), out);
    }
}
