package org.dtorch.polyglot;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.graalvm.polyglot.Context;
import org.graalvm.polyglot.Engine;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.PolyglotAccess;
import org.graalvm.polyglot.PolyglotException;
import org.graalvm.polyglot.Value;
import org.graalvm.python.embedding.GraalPyResources;
import org.graalvm.python.embedding.VirtualFileSystem;

/**
 * Owns one GraalPy {@link Context} in which Python code drives a DTorch runtime: the {@code dtorch} package
 * comes from the classpath through GraalPy's virtual file system (the {@code python-facade} module), and the
 * runtime's {@link PyBridge} is published as the polyglot binding {@value #BRIDGE_BINDING}.
 *
 * <p>Host access is an allow-list: Python may call only methods annotated {@link HostAccess.Export} (those of
 * {@link PyBridge}, {@link PyTensorFuture} and {@link PyHostTensor}), read Java arrays they return, and look
 * up no host class. It may start threads, use the host's files and sockets through GraalPy's virtual file
 * system (asyncio needs a self-pipe), and native code ({@code ctypes}, which lays zero-copy views over tensor
 * memory).
 *
 * <p>Several contexts may share one {@link Engine} (tests do: a context then starts in a fraction of the
 * time). Closing the host closes its context, not the engine or the runtime.
 *
 * <p>Not thread-safe for creation and closing; Python code in the context may use threads.
 */
public final class PythonHost implements AutoCloseable {
    /** The polyglot binding under which the Python package finds its bridge. */
    public static final String BRIDGE_BINDING = "dtorch.bridge";

    /** Only methods annotated {@link HostAccess.Export}, plus read access to the arrays they return. */
    public static final HostAccess ALLOW_LIST = HostAccess.newBuilder(HostAccess.EXPLICIT)
        .allowArrayAccess(true)
        .build();

    private final Context context;

    private PythonHost(Builder b) {
        // The dtorch package is read from the classpath through the virtual file system; scripts and their data
        // are on the host file system, which the VFS passes through.
        VirtualFileSystem vfs = VirtualFileSystem.newBuilder().allowHostIO(VirtualFileSystem.HostIO.READ_WRITE).build();
        Context.Builder builder = GraalPyResources.contextBuilder(vfs)
            .allowHostAccess(ALLOW_LIST)
            .allowHostClassLookup(className -> false)
            .allowPolyglotAccess(PolyglotAccess.ALL)
            .allowCreateThread(true)
            .allowNativeAccess(true)
            .arguments("python", b.argv.toArray(String[]::new));
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
        this.context = builder.build();
        if (b.bridge != null) {
            context.getPolyglotBindings().putMember(BRIDGE_BINDING, b.bridge);
        }
    }

    /** A builder. */
    public static Builder builder() {
        return new Builder();
    }

    /** A new engine to share between hosts, quiet about running without the optimizing compiler. */
    public static Engine sharedEngine() {
        return Engine.newBuilder("python").option("engine.WarnInterpreterOnly", "false").build();
    }

    /** The engine's implementation name: {@code GraalVM CE} with the optimizing JIT, {@code Interpreted} without. */
    public String engineImplementation() {
        return context.getEngine().getImplementationName();
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
        Objects.requireNonNull(script, "script");
        Path absolute = script.toAbsolutePath();
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
            System.err.println(formatTraceback(e));
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

    /** Closes the context (not the engine or the runtime). */
    @Override
    public void close() {
        context.close(true);
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
        private List<String> argv = List.of();

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

        /** The initial {@code sys.argv} (scripts set their own). */
        public Builder argv(List<String> value) {
            this.argv = List.copyOf(value);
            return this;
        }

        /** The host with its context. */
        public PythonHost build() {
            return new PythonHost(this);
        }
    }
}
