package org.dtorch.python;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.Engine;

/**
 * A bytecode cache for the Python modules that the test scripts of one test JVM import, so that each script's new
 * engine loads {@code site}, {@code runpy}, {@code torch} and {@code dtorch} as compiled bytecode instead of
 * parsing and compiling their sources again: with GraalPy 25.0.1 in the interpreter that compiling is about half of a
 * script's fixed cost (about 1 s of CPU of 2 s, measured in a warm test JVM). Nothing but compiled code is shared:
 * every script still has an engine, a context and a runtime of its own.
 *
 * <p>The cache is CPython's {@code sys.pycache_prefix} (GraalPy's option {@code python.PyCachePrefix}): a directory
 * of {@code .pyc} files that importlib checks against each source's modification time and size. The directory belongs
 * to this JVM alone (a new one per JVM, under {@code java.io.tmpdir}, removed at exit), since the sources of the {@code dtorch} package
 * come from GraalPy's virtual file system, which reports no modification time: a cache kept across builds could
 * serve an edited module of unchanged size. A JVM's contexts run one after the other, which the writer relies on.
 *
 * <p>Not thread-safe: hosts that {@linkplain #writeTo write to} the cache run one at a time.
 */
final class ScriptBytecode {
    /**
     * Run in a new context before its script: lets importlib write the bytecode of each module it compiles, and writes
     * that of the modules imported before (at {@code site}'s initialization, which runs before any code of ours).
     * importlib writes to a temporary name and then renames it over the {@code .pyc}, but the context's file system has
     * no atomic move ({@code os.replace} fails), so here a file is created whole under its own name, once: no other
     * context runs meanwhile, and the directory is this JVM's.
     */
    private static final String WRITER = String.join("\n",
        "def _dtorch_test_write_bytecode():",
        "    import os, sys",
        "    import importlib._bootstrap_external as external",
        "",
        "    def write(path, data, mode=0o666):",
        "        with open(path, 'xb') as f:",
        "            f.write(data)",
        "",
        "    external._write_atomic = write",
        "    sys.dont_write_bytecode = False",
        "    for module in list(sys.modules.values()):",
        "        spec = getattr(module, '__spec__', None)",
        "        if spec is None or not spec.cached or not isinstance(spec.loader, external.SourceFileLoader):",
        "            continue",
        "        if not os.path.exists(spec.cached):",
        "            try:",
        "                spec.loader.get_code(spec.name)",
        "            except (ImportError, OSError):",
        "                pass  # left uncached: its next import compiles it, as without a cache",
        "",
        "_dtorch_test_write_bytecode()",
        "del _dtorch_test_write_bytecode");

    private static final Path DIRECTORY = newDirectory();

    private ScriptBytecode() {
    }

    /**
     * A new engine whose contexts read compiled modules from this JVM's cache, quiet about running without the
     * optimizing compiler as {@link PythonHost#sharedEngine()} is; the caller closes it.
     */
    static Engine engine() {
        return Engine.newBuilder("python")
            .option("engine.WarnInterpreterOnly", "false")
            .option("python.PyCachePrefix", DIRECTORY.toString())
            .build();
    }

    /** Makes {@code host}'s context (of an {@link #engine()}) write what it compiles into the cache. */
    static void writeTo(PythonHost host) {
        host.eval(WRITER);
    }

    /**
     * {@link Launcher#run(String[], Map)} with this process's environment, its script's host on an {@link #engine()}
     * (an isolated host as the launcher makes it: an isolated script may read nothing of the cache): for tests of what
     * the launcher does with its arguments, its script and its exit status, not of how it makes an engine.
     */
    static int launch(String... args) {
        List<Engine> engines = new ArrayList<>();
        ScriptHosts hosts = new ScriptHosts() {
            @Override
            public Path workingDirectory() {
                return ScriptHosts.DIRECT.workingDirectory();
            }

            @Override
            public PythonHost open(PyBridge bridge, Path isolatedDirectory) {
                if (isolatedDirectory != null) {
                    return ScriptHosts.DIRECT.open(bridge, isolatedDirectory);
                }
                Engine engine = engine();
                engines.add(engine);
                PythonHost host = PythonHost.builder().engine(engine).bridge(bridge).build();
                writeTo(host);
                return host;
            }
        };
        try {
            return Launcher.run(args, System.getenv(), hosts);
        } finally {
            engines.forEach(Engine::close);
        }
    }

    private static Path newDirectory() {
        try {
            Path tmp = Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir")));
            Path directory = Files.createTempDirectory(tmp, "python-bytecode-");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> remove(directory), "remove-python-bytecode"));
            return directory;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the test JVM's Python bytecode cache", e);
        }
    }

    private static void remove(Path directory) {
        try (Stream<Path> files = Files.walk(directory)) {
            for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            System.err.println("cannot remove the Python bytecode cache " + directory + ": " + e);
        }
    }
}
