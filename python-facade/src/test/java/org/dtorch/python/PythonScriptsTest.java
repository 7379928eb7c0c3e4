package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.Engine;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * Runs every {@code src/test/python/test_*.py} under GraalPy, each with a runtime of 4 CPU devices and a context
 * on an engine of its own; a failing script fails with its output, Python tracebacks included. This class runs the
 * scripts at even positions in name order, {@link PythonScriptsOtherHalfTest} those at odd ones, so that the build's two
 * test JVMs run the halves side by side; {@code -Ddtorch.test.scripts} runs its scripts here, all of them.
 *
 * <p>Not one shared engine: with GraalPy 25.0.1, once a context that a foreign thread entered (a callback of
 * the runtime) has closed, a later context of the same engine may never hand the GIL back to its main thread
 * while another Python thread runs (test_callbacks then test_futures hung, every time). See PythonHost. What the
 * engines share is the compiled bytecode of the modules they import ({@link ScriptBytecode}): a script's fixed cost
 * is then about 1 s of CPU instead of 2.
 *
 * <p>The scripts run in GraalPy's interpreter ({@link PythonHost#engineImplementation()} is {@code Interpreted}):
 * the test JVM has the Graal compiler on its class path, not on the upgrade module path with JVMCI as {@code ./dtorch}
 * puts it, so Truffle takes its fallback runtime. That is the cheaper mode for scripts of a few seconds, which end
 * before the optimizing JIT's compilations (on both cores of a small machine) would pay for themselves; a new engine
 * in a warm JVM costs about 2.3 s there against 4.8 s with the JIT (docs/benchmarks.md, Start-up). {@code ./dtorch}'s
 * JIT mode is what RunServerTest (slow) runs.
 */
class PythonScriptsTest {
    private static final Path SCRIPTS = Path.of("src/test/python");

    @TestFactory
    @Timeout(600)
    Stream<DynamicTest> pythonScripts() throws IOException {
        return half(0);
    }

    /** The scripts at positions {@code parity}, {@code parity + 2}, ... (all of them, here, when some were chosen). */
    static Stream<DynamicTest> half(int parity) throws IOException {
        List<Path> all = scripts();
        boolean chosen = !System.getProperty("dtorch.test.scripts", "").isBlank();
        return java.util.stream.IntStream.range(0, all.size())
            .filter(i -> chosen ? parity == 0 : i % 2 == parity)
            .mapToObj(all::get)
            .map(script -> DynamicTest.dynamicTest(script.getFileName().toString(), () -> runScript(script, List.of())));
    }

    /**
     * The scripts with loops whose full length only the slow run takes ({@code _testing.iterations}), at that length: they
     * see {@code --slow} among their arguments.
     */
    @TestFactory
    @Timeout(1800)
    @Tag("slow")
    Stream<DynamicTest> pythonScriptsWithTheirLoopsAtFullLength() throws IOException {
        List<Path> looping = new ArrayList<>();
        for (Path script : scripts()) {
            if (Files.readString(script).contains("iterations(")) {
                looping.add(script);
            }
        }
        return looping.stream().map(script -> DynamicTest.dynamicTest(script.getFileName().toString() + " --slow",
            () -> runScript(script, List.of("--slow"))));
    }

    private static List<Path> scripts() throws IOException {
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
        return scripts;
    }

    private static void runScript(Path script, List<String> args) {
        runScript(script, DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(60)).build(), args);
    }

    /**
     * Runs {@code script} on a runtime of {@code options} with a context on an engine of its own, as the launcher
     * does but in this JVM; fails with the script's output when it exits with a status other than 0.
     */
    static void runScript(Path script, DTorchOptions options) {
        runScript(script, options, List.of());
    }

    /** {@link #runScript(Path, DTorchOptions)} with {@code args} as the script's arguments. */
    static void runScript(Path script, DTorchOptions options, List<String> args) {
        ByteArrayOutputStream output = new ByteArrayOutputStream();
        PrintStream originalErr = System.err;
        int status;
        try (PrintStream capture = new PrintStream(output, true, StandardCharsets.UTF_8);
             Engine engine = ScriptBytecode.engine();
             DTorch runtime = DTorch.init(options);
             PythonHost host = PythonHost.builder().engine(engine).bridge(new PyBridge(runtime)).out(capture).err(capture).build()) {
            System.setErr(capture);
            ScriptBytecode.writeTo(host);
            status = host.runScript(script, args);
        } finally {
            System.setErr(originalErr);
        }
        String text = output.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, script.getFileName() + " failed:\n" + text);
    }
}
