package org.dtorch.api;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;
import org.dtorch.core.graph.GraphDot;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.trace.Profiler;

/**
 * What a {@link DTorch} runtime tells about itself: the devices' memory statistics, the graph dump, and the profiler,
 * including the trace {@link DTorchOptions.Builder#trace} records from the start until the runtime closes.
 *
 * <p>Thread-safe: the trace is written once, under this object's lock, by whichever thread closes the runtime; the
 * other calls are the client thread's.
 */
final class Diagnostics {
    private final DTorch runtime;
    private final Profiler profiler = new Profiler();
    /** Where the runtime's close writes the trace, or null; set to null once written. */
    private Path tracePath;

    /** Starts recording at once when {@code tracePath} is not null, so that the runtime's start is in the trace. */
    Diagnostics(DTorch runtime, Path tracePath) {
        this.runtime = runtime;
        this.tracePath = tracePath;
        if (tracePath != null) {
            profiler.start();
        }
    }

    /** Stops a recording the constructor started, for a runtime that failed to start. */
    void abandonTrace() {
        if (profiler.isRecording()) {
            profiler.stop();
        }
    }

    Profiler profiler() {
        return profiler;
    }

    /** Stops the recording {@link DTorchOptions.Builder#trace} started, once, and writes it. */
    synchronized void writeTrace() {
        Path path = tracePath;
        if (path == null) {
            return;
        }
        tracePath = null;
        if (profiler.isRecording()) {
            profiler.stop();
        }
        try {
            profiler.export(path);
        } catch (IOException e) {
            throw new UncheckedIOException("DTorch.close: cannot write the trace to " + path + ": " + e.getMessage(), e);
        }
    }

    /** {@link DTorch#dumpGraph(Path)}. */
    void dumpGraph(Path path) {
        Objects.requireNonNull(path, "dumpGraph: path is null");
        String dot = GraphDot.format(runtime.graph().history().drain());
        try {
            Files.writeString(path, dot);
        } catch (IOException e) {
            throw new UncheckedIOException("dumpGraph: cannot write " + path + ": " + e.getMessage(), e);
        }
    }

    MemoryStats memoryStats(long device) {
        return runtime.runtime().memoryStats(device);
    }

    MemoryStats resetPeakMemoryStats(long device) {
        return runtime.runtime().resetPeakMemoryStats(device);
    }
}
