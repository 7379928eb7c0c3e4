package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(120)
class LauncherTest {

    private static int launch(String... args) {
        return Launcher.run(args);
    }

    private static String captureErr(Runnable body) {
        PrintStream original = System.err;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        System.setErr(new PrintStream(buffer, true, StandardCharsets.UTF_8));
        try {
            body.run();
        } finally {
            System.setErr(original);
        }
        return buffer.toString(StandardCharsets.UTF_8);
    }

    @Test
    void shouldReturnTheScriptsExitCodeAndPassItsArguments(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("exit.py");
        Files.writeString(script, "import sys, dtorch\nassert sys.argv[1:] == ['a', 'b'], sys.argv\n"
            + "assert dtorch.device_count() == 2\nraise SystemExit(3)\n");
        assertEquals(3, launch("run", "--devices", "cpu:2", "--same-device", script.toString(), "a", "b"));
        Path ok = dir.resolve("ok.py");
        Files.writeString(ok, "import dtorch\nassert dtorch.ones(2).sum().to_torch().item() == 2.0\n");
        assertEquals(0, launch("run", ok.toString()));
    }

    @Test
    @org.junit.jupiter.api.Tag("multiprocess")
    void shouldRunAScriptWithAWorkerProcessPerDevice(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("processes.py");
        Files.writeString(script, String.join("\n",
            "import dtorch",
            "mesh = dtorch.init_device_mesh('cpu', (2,))",
            "x = dtorch.arange(8, device_mesh=mesh, placements=[dtorch.Shard(0)])",
            "y = (x * 2).redistribute(mesh, [dtorch.Replicate()])",
            "assert y.to_torch().tolist() == [0, 2, 4, 6, 8, 10, 12, 14], y.to_torch().tolist()",
            "assert y.sum().to_torch().item() == 56",
            ""));
        assertEquals(0, launch("run", "--devices", "cpu:2", "--per-device-process", script.toString()));
    }

    @Test
    void shouldPrintThePythonTracebackAndFailOnAnUncaughtError(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("broken.py");
        Files.writeString(script, "import dtorch\n\ndef inner():\n    return dtorch.zeros(3, device_mesh=dtorch.init_device_mesh('cpu', (4,)),"
            + " placements=[dtorch.Shard(0)])\n\ninner()\n");
        int[] status = new int[1];
        String err = captureErr(() -> status[0] = launch("run", "--log-level", "warning", script.toString()));
        assertEquals(1, status[0]);
        assertTrue(err.contains("Traceback (most recent call last):") && err.contains("broken.py\", line 4, in inner")
            && err.contains("ValueError") && err.contains("splits it 4 ways"), err);
    }

    @Test
    void shouldRejectBadCommandLines(@TempDir Path dir) {
        assertEquals(2, launch());
        assertEquals(2, launch("run"));
        assertEquals(2, launch("run", "--devices", "cuda:2", "x.py"));
        assertEquals(2, launch("run", "--bogus", "x.py"));
        assertEquals(2, launch("run", dir.resolve("missing.py").toString()));
    }
}
