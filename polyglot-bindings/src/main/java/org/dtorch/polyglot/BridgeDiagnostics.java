package org.dtorch.polyglot;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.trace.Trace;
import org.graalvm.polyglot.Value;

/**
 * What {@link PyBridge} tells Python about the runtime: graph dumps (refused to an isolated script, which may write no
 * file), line charts (refused likewise), collective counts, memory statistics as flat arrays in the order of {@link MemoryStats#KEYS}, and the profiler,
 * whose traces reach Python as Chrome trace JSON or rows of key averages.
 *
 * <p>Thread-safe: the isolation flag is set by the host before the script runs and read by any thread; the rest is the
 * Python client thread's.
 */
final class BridgeDiagnostics {
    private final DTorch runtime;
    /** Set for an isolated script, which may write no file, not even through the runtime (a graph dump). */
    private volatile boolean isolated;

    BridgeDiagnostics(DTorch runtime) {
        this.runtime = runtime;
    }

    void isolate() {
        isolated = true;
    }

    /** {@link PyBridge#dumpGraph}. */
    void dumpGraph(String path) {
        if (isolated) {
            throw new SecurityException("dump_graph: a script run with --isolated may write no file, and the dump writes " + path);
        }
        runtime.dumpGraph(Path.of(path));
    }

    /** {@link PyBridge#writeLineChart}. */
    void writeLineChart(String path, String title, String xTitle, String yTitle, Value series, boolean logY) {
        if (isolated) {
            throw new SecurityException("line_chart: a script run with --isolated may write no file, and the chart writes " + path);
        }
        LineChartFile.write(path, title, xTitle, yTitle, series, logY);
    }

    /** {@link PyBridge#collectiveCount}. */
    long collectiveCount(String kind) {
        return runtime.runtime().groups().collectiveCounter().count(CollectiveKind.valueOf(kind));
    }

    static String[] memoryStatKeys() {
        return MemoryStats.KEYS.toArray(String[]::new);
    }

    long[] memoryStats(long device) {
        return runtime.memoryStats(device).values();
    }

    long[] resetPeakMemoryStats(long device) {
        return runtime.resetPeakMemoryStats(device).values();
    }

    void profilerStart() {
        runtime.profiler().start();
    }

    Trace profilerStop() {
        return runtime.profiler().stop();
    }

    /** {@link PyBridge#chromeJson}. */
    static String chromeJson(Trace trace) {
        StringWriter out = new StringWriter();
        try {
            trace.writeChromeJson(out);
        } catch (IOException e) {
            throw new UncheckedIOException(e);  // a StringWriter does not fail
        }
        return out.toString();
    }

    /** {@link PyBridge#keyAverages}. */
    static Object[] keyAverages(Trace trace) {
        return trace.keyAverages().stream()
            .map(r -> new Object[] {r.category(), r.name(), r.calls(), r.totalNanos(), r.bytes()})
            .toArray();
    }
}
