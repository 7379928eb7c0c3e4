package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.Engine;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * Runs every {@code src/test/python/test_*.py} under GraalPy, each with a runtime of 4 CPU devices and a context
 * on one shared engine; a failing script fails with its output, Python tracebacks included.
 */
class PythonScriptsTest {
    private static final Path SCRIPTS = Path.of("src/test/python");
    private static final Engine ENGINE = PythonHost.sharedEngine();

    @AfterAll
    static void closeEngine() {
        ENGINE.close();
    }

    @TestFactory
    @Timeout(600)
    Stream<DynamicTest> pythonScripts() throws IOException {
        List<Path> scripts;
        try (Stream<Path> files = Files.list(SCRIPTS)) {
            // -Ddtorch.test.scripts=test_a.py,test_b.py runs only those (in that order), to chase a failure.
            String only = System.getProperty("dtorch.test.scripts", "");
            List<String> chosen = only.isBlank() ? List.of() : List.of(only.split(","));
            scripts = files.filter(p -> p.getFileName().toString().matches("test_.*\\.py"))
                .filter(p -> chosen.isEmpty() || chosen.contains(p.getFileName().toString()))
                .sorted(chosen.isEmpty() ? java.util.Comparator.naturalOrder()
                    : java.util.Comparator.comparingInt(p -> chosen.indexOf(p.getFileName().toString())))
                .toList();
        }
        return scripts.stream().map(script -> DynamicTest.dynamicTest(script.getFileName().toString(), () -> runScript(script)));
    }

    private static void runScript(Path script) {
        ByteArrayOutputStream output = new ByteArrayOutputStream();
        PrintStream originalErr = System.err;
        int status;
        try (PrintStream capture = new PrintStream(output, true, StandardCharsets.UTF_8);
             DTorch runtime = DTorch.init(DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(60)).build());
             PythonHost host = PythonHost.builder().engine(ENGINE).bridge(new PyBridge(runtime)).out(capture).err(capture).build()) {
            System.setErr(capture);
            status = host.runScript(script, List.of());
        } finally {
            System.setErr(originalErr);
        }
        String text = output.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, script.getFileName() + " failed:\n" + text);
    }
}
