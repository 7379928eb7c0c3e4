package org.dtorch.polyglot;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.stream.Stream;
import org.dtorch.polyglot.torch.TorchModule;
import org.graalvm.polyglot.Context;
import org.graalvm.polyglot.Engine;
import org.graalvm.polyglot.EnvironmentAccess;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.PolyglotAccess;
import org.graalvm.polyglot.PolyglotException;
import org.graalvm.polyglot.Value;
import org.graalvm.polyglot.io.FileSystem;
import org.graalvm.polyglot.io.IOAccess;
import org.graalvm.python.embedding.GraalPyResources;
import org.graalvm.python.embedding.VirtualFileSystem;

/**
 * Owns one GraalPy {@link Context} in which Python code drives a DTorch runtime: the {@code dtorch} package
 * comes from the classpath through GraalPy's virtual file system (the {@code python-facade} module), and the
 * runtime's {@link PyBridge} is published as the polyglot binding {@value #BRIDGE_BINDING}; libtorch's operators, for
 * the {@code torch} package, as {@value TorchModule#BINDING} ({@link TorchModule}), with or without a runtime.
 *
 * <p>Host access is an allow-list: Python may call only methods annotated {@link HostAccess.Export} (those of
 * {@link PyBridge}, {@link PyTensorFuture} and the {@code torch} package's
 * {@link TorchModule}, {@link org.dtorch.polyglot.torch.AtenOperator}, {@link org.dtorch.polyglot.torch.BoundCall} and
 * {@link org.dtorch.polyglot.torch.PyTensor}), read Java arrays they return, and look
 * up no host class. That list keeps the JVM's objects out of reach; it is not a sandbox. By default a script has
 * the rights of the user who runs it, as under CPython: the host's files and sockets (through GraalPy's virtual file
 * system; asyncio needs a self-pipe), processes, threads, and native code ({@code ctypes}, which lays zero-copy views
 * over tensor memory).
 *
 * <p>{@linkplain Builder#isolatedIn(Path) Isolated}, a script may read one directory and nothing else of the host
 * file system, write nothing, and open no socket, start no process, load no native code and see no environment
 * variable; it may still start threads. The {@code dtorch} package is then copied out of the virtual file system
 * into a private temporary directory (read-only for the script), removed at {@link #close()}, and the polyglot
 * binding {@value #ISOLATED_BINDING} tells the package to do without {@code ctypes} and sockets.
 *
 * <p>Several contexts may share one {@link Engine} (a context then starts in a fraction of the time), one after
 * the other only: with GraalPy 25.0.1, once a context that a foreign thread entered (a runtime's callback
 * thread) has closed, a later context of the same engine may never hand the GIL back to its main thread while
 * another Python thread runs. Closing the host closes its context, not the engine or the runtime.
 *
 * <p>Not thread-safe for creation and closing; Python code in the context may use threads.
 */
public final class PythonHost implements AutoCloseable {
    /** The polyglot binding under which the Python package finds its bridge. */
    public static final String BRIDGE_BINDING = "dtorch.bridge";
    /** The polyglot binding that is {@code true} in an isolated context. */
    public static final String ISOLATED_BINDING = "dtorch.isolated";

    /** Only methods annotated {@link HostAccess.Export}, plus read access to the arrays they return. */
    public static final HostAccess ALLOW_LIST = HostAccess.newBuilder(HostAccess.EXPLICIT)
        .allowArrayAccess(true)
        .build();

    private final Context context;
    /** The bridge the script reaches, or null; published once, at build or by {@link #publishBridge}. */
    private PyBridge bridge;
    /** The directory an isolated script may read, or null. */
    private final Path isolatedDirectory;
    /** The isolated context's copy of the dtorch package, removed at close; or null. */
    private final Path packageCopy;

    private PythonHost(Builder b) {
        this.isolatedDirectory = b.isolatedDirectory;
        this.bridge = b.bridge;
        this.packageCopy = isolatedDirectory == null ? null : copyPackage();
        try {
            Context.Builder builder = isolatedDirectory == null ? hostBuilder() : isolatedBuilder(isolatedDirectory, packageCopy);
            builder.arguments("python", b.argv.toArray(String[]::new));
            if (b.engine != null) {
                builder.engine(b.engine);
            } else {
                builder.option("engine.WarnInterpreterOnly", "false");
            }
            if (b.out != null) {
                builder.out(b.out);
            }
            if (b.err != null) {
                builder.err(b.err);
            }
            if (b.in != null) {
                builder.in(b.in);
            }
            this.context = builder.build();
        } catch (RuntimeException | Error e) {
            removePackageCopy();
            throw e;
        }
        context.getPolyglotBindings().putMember(ISOLATED_BINDING, isolatedDirectory != null);
        context.getPolyglotBindings().putMember(TorchModule.BINDING, TorchModule.shared());
        if (b.bridge != null) {
            if (isolatedDirectory != null) {
                b.bridge.isolate();
            }
            context.getPolyglotBindings().putMember(BRIDGE_BINDING, b.bridge);
        }
    }

    /** The script's rights are the user's: the package from the classpath, every other path from the host. */
    private static Context.Builder hostBuilder() {
        VirtualFileSystem vfs = VirtualFileSystem.newBuilder().allowHostIO(VirtualFileSystem.HostIO.READ_WRITE).build();
        return GraalPyResources.contextBuilder(vfs)
            .allowHostAccess(ALLOW_LIST)
            .allowHostClassLookup(className -> false)
            .allowPolyglotAccess(PolyglotAccess.ALL)
            .allowCreateThread(true)
            .allowNativeAccess(true);
    }

    /**
     * Reads {@code directory} and the package copy, and nothing else. {@code GraalPyResources} grants every privilege
     * not set explicitly ({@code allowAllAccess}), so that is turned off first.
     */
    private static Context.Builder isolatedBuilder(Path directory, Path packageCopy) {
        return GraalPyResources.contextBuilder(packageCopy)
            .allowAllAccess(false)
            .allowHostAccess(ALLOW_LIST)
            .allowHostClassLookup(className -> false)
            .allowHostClassLoading(false)
            .allowPolyglotAccess(PolyglotAccess.newBuilder().allowBindingsAccess("python").build())
            .allowCreateThread(true)
            .allowNativeAccess(false)
            .allowCreateProcess(false)
            .allowEnvironmentAccess(EnvironmentAccess.NONE)
            .allowIO(IOAccess.newBuilder()
                .allowHostSocketAccess(false)
                .fileSystem(readOnlyWithin(List.of(directory, packageCopy)))
                .build())
            .currentWorkingDirectory(directory);
    }

    /**
     * A file system that reads below {@code roots} (links resolved first, so none leads out) and nothing else, except
     * GraalPy's own standard library (its language home and internal resources).
     */
    private static FileSystem readOnlyWithin(List<Path> roots) {
        List<Path> realRoots = roots.stream().map(PythonHost::realPath).toList();
        FileSystem readOnly = FileSystem.newReadOnlyFileSystem(FileSystem.newDefaultFileSystem());
        FileSystem denied = FileSystem.allowInternalResourceAccess(FileSystem.allowLanguageHomeAccess(FileSystem.newDenyIOFileSystem()));
        return FileSystem.newCompositeFileSystem(denied, FileSystem.Selector.of(readOnly, path -> {
            Path resolved = resolveLinks(path);
            return resolved != null && realRoots.stream().anyMatch(resolved::startsWith);
        }));
    }

    /** {@code path} with every link of its longest existing prefix resolved; null if that fails. */
    private static Path resolveLinks(Path path) {
        Path existing = path;
        while (existing != null && !Files.exists(existing, LinkOption.NOFOLLOW_LINKS)) {
            existing = existing.getParent();
        }
        if (existing == null) {
            return null;
        }
        try {
            return existing.toRealPath().resolve(existing.relativize(path));
        } catch (IOException | SecurityException e) {
            return null;
        }
    }

    private static Path realPath(Path path) {
        try {
            return path.toRealPath();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot resolve " + path, e);
        }
    }

    /** The dtorch package, copied out of the virtual file system into a new owner-only temporary directory. */
    private static Path copyPackage() {
        try {
            Path tmp = Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir")));
            Path copy = Files.createTempDirectory(tmp, "dtorch-python-");
            try (VirtualFileSystem vfs = VirtualFileSystem.newBuilder().allowHostIO(VirtualFileSystem.HostIO.NONE).build()) {
                GraalPyResources.extractVirtualFileSystemResources(vfs, copy);
            }
            return copy;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot copy the dtorch package for an isolated context", e);
        }
    }

    private void removePackageCopy() {
        if (packageCopy == null) {
            return;
        }
        try (Stream<Path> files = Files.walk(packageCopy)) {
            for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            System.getLogger(PythonHost.class.getName()).log(System.Logger.Level.WARNING,
                "cannot remove the isolated context's package copy " + packageCopy + ": " + e);
        }
    }

    /** A builder. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A new engine, quiet about running without the optimizing compiler. Share it only between hosts whose scripts
     * receive no callbacks (see the class comment).
     */
    public static Engine sharedEngine() {
        return Engine.newBuilder("python").option("engine.WarnInterpreterOnly", "false").build();
    }

    /** The engine's implementation name: {@code GraalVM CE} with the optimizing JIT, {@code Interpreted} without. */
    public String engineImplementation() {
        return context.getEngine().getImplementationName();
    }

    /**
     * Publishes the runtime's bridge in a context built without one (a context prepared before its run's runtime
     * exists: the {@code dtorch} package looks the bridge up on first use, not at import).
     *
     * @throws IllegalStateException if this host has a bridge already
     */
    public void publishBridge(PyBridge value) {
        Objects.requireNonNull(value, "bridge");
        if (bridge != null) {
            throw new IllegalStateException("this Python host has a bridge already");
        }
        if (isolatedDirectory != null) {
            value.isolate();
        }
        bridge = value;
        context.getPolyglotBindings().putMember(BRIDGE_BINDING, value);
    }

    /**
     * Stops the script from another thread: the context's threads are cancelled where they run guest code, and the
     * thread in {@link #runScript} returns. The host must still be {@linkplain #close() closed}.
     */
    public void cancel() {
        context.close(true);
    }

    /** Evaluates Python code; the result must not outlive this host. */
    public Value eval(String code) {
        return context.eval("python", code);
    }

    /**
     * Runs a Python script as {@code __main__} with {@code sys.argv = [script, args...]}.
     *
     * @return the script's exit status: 0, the code of a {@code SystemExit}, or 1 after an uncaught exception
     *         (its Python traceback is printed to the context's standard error)
     */
    public int runScript(Path script, List<String> args) {
        return runScript(script, Path.of("").toAbsolutePath(), args);
    }

    /**
     * Runs a Python script as {@link #runScript(Path, List)} does, {@code script} taken relative to {@code base} (the
     * directory the user ran it from, where that is not this process's); {@code sys.argv[0]} is {@code script} as given.
     */
    public int runScript(Path script, Path base, List<String> args) {
        Objects.requireNonNull(script, "script");
        Path absolute = base.resolve(script).toAbsolutePath();
        if (!Files.isReadable(absolute)) {
            throw new UncheckedIOException(new java.io.FileNotFoundException("cannot read " + script));
        }
        List<String> argv = new ArrayList<>();
        argv.add(script.toString());
        argv.addAll(args);
        Value bindings = context.getBindings("python");
        bindings.putMember("_dtorch_argv", argv.toArray(String[]::new));
        bindings.putMember("_dtorch_script", absolute.toString());
        try {
            // Python runs the script (runpy, as `python script.py` does) and prints its own traceback.
            context.eval("python", RUN_SCRIPT);
            return 0;
        } catch (PolyglotException e) {
            if (e.isExit()) {
                return e.getExitStatus();
            }
            // Python printed its own traceback for its own exceptions; this is what Python could not catch, such as
            // an operation an isolated context refuses outright (GraalPy 25 does so for sockets and os.system).
            System.err.println(formatTraceback(e));
            if (isolatedDirectory != null) {
                System.err.println("(the script runs isolated, as with --isolated: it may read " + isolatedDirectory
                    + " and nothing else, and may not open sockets, start processes or load native code)");
            }
            return 1;
        }
    }

    private static final String RUN_SCRIPT = String.join("\n",
        "import os, runpy, sys, traceback",
        "sys.argv = list(_dtorch_argv)",
        "sys.path.insert(0, os.path.dirname(_dtorch_script))",
        "try:",
        "    runpy.run_path(_dtorch_script, run_name='__main__')",
        "except SystemExit:",
        "    raise",
        "except BaseException as error:",
        "    tb = error.__traceback__",
        "    while tb is not None and tb.tb_frame.f_code.co_filename != _dtorch_script:",
        "        tb = tb.tb_next",
        "    traceback.print_exception(type(error), error, tb or error.__traceback__)",
        "    sys.stderr.flush()",
        "    raise SystemExit(1)");

    /** A Python-style traceback of {@code e} from its guest frames (for errors outside the script's own code). */
    public static String formatTraceback(PolyglotException e) {
        StringBuilder out = new StringBuilder("Traceback (most recent call last):\n");
        List<PolyglotException.StackFrame> frames = new ArrayList<>();
        for (PolyglotException.StackFrame frame : e.getPolyglotStackTrace()) {
            if (frame.isGuestFrame()) {
                frames.add(frame);
            }
        }
        java.util.Collections.reverse(frames);
        for (PolyglotException.StackFrame frame : frames) {
            var location = frame.getSourceLocation();
            out.append("  File \"").append(location == null ? "<unknown>" : location.getSource().getName()).append("\", line ")
                .append(location == null ? "?" : location.getStartLine()).append(", in ").append(frame.getRootName()).append('\n');
        }
        return out.append(e.getMessage()).toString();
    }

    /** Closes the context (not the engine or the runtime), and removes an isolated context's package copy. */
    @Override
    public void close() {
        try {
            context.close(true);
        } finally {
            if (bridge != null) {
                bridge.stopCallbacks(); // threads that entered this context never enter another
            }
            removePackageCopy();
        }
    }

    /**
     * Builds a {@link PythonHost}.
     *
     * <p>Not thread-safe: one thread fills a builder.
     */
    public static final class Builder {
        private Engine engine;
        private PyBridge bridge;
        private OutputStream out;
        private OutputStream err;
        private InputStream in;
        private List<String> argv = List.of();
        private Path isolatedDirectory;

        private Builder() {
        }

        /** Shares {@code value} with other hosts. */
        public Builder engine(Engine value) {
            this.engine = value;
            return this;
        }

        /** The runtime Python drives. */
        public Builder bridge(PyBridge value) {
            this.bridge = value;
            return this;
        }

        /** Where Python's standard output goes (default: the JVM's). */
        public Builder out(OutputStream value) {
            this.out = value;
            return this;
        }

        /** Where Python's standard error goes (default: the JVM's). */
        public Builder err(OutputStream value) {
            this.err = value;
            return this;
        }

        /** Where Python's standard input comes from (default: the JVM's). */
        public Builder in(InputStream value) {
            this.in = value;
            return this;
        }

        /** The initial {@code sys.argv} (scripts set their own). */
        public Builder argv(List<String> value) {
            this.argv = List.copyOf(value);
            return this;
        }

        /**
         * Isolates the script: it may read {@code directory} (its working directory) and nothing else of the host,
         * and may not write files, open sockets, start processes, load native code or read environment variables.
         */
        public Builder isolatedIn(Path directory) {
            Path absolute = directory.toAbsolutePath().normalize();
            if (!Files.isDirectory(absolute)) {
                throw new IllegalArgumentException("an isolated context needs a directory to read, got " + directory);
            }
            this.isolatedDirectory = absolute;
            return this;
        }

        /** The host with its context. */
        public PythonHost build() {
            return new PythonHost(this);
        }
    }
}
