package org.dtorch.core.trace;

import java.io.IOException;
import java.nio.file.Path;

/**
 * A user's handle on the {@link Tracer}, in the manner of torch.profiler: {@link #start()}, run the program,
 * {@link #stop()}, then {@link #export(Path)} the timeline or print the {@link #table()}. The tracer is one per
 * process, so one profiler records at a time.
 *
 * <p>Thread-safe: its methods are serialized (a runtime's {@code close()} may stop it from another thread).
 */
public final class Profiler {
    private Trace last;
    private boolean recording;

    /**
     * Starts recording.
     *
     * @throws IllegalStateException if this or another profiler of the process already records
     */
    public synchronized void start() {
        Tracer.start();
        recording = true;
    }

    /** True between {@link #start()} and {@link #stop()}. */
    public synchronized boolean isRecording() {
        return recording;
    }

    /**
     * Stops recording and returns the trace (also kept for {@link #export} and {@link #table}), with the events of the
     * worker processes that recorded for it ({@link Tracer#stop()}).
     *
     * @throws IllegalStateException if this profiler does not record, or if a worker's events did not come within its
     *                               runtime's timeout (the message names it; the recording is over all the same)
     */
    public synchronized Trace stop() {
        if (!recording) {
            throw new IllegalStateException("Profiler.stop: this profiler is not recording (call start() first)");
        }
        recording = false;
        last = Tracer.stop();
        return last;
    }

    /** The last trace stopped. @throws IllegalStateException before the first {@link #stop()} */
    public synchronized Trace trace() {
        if (last == null) {
            throw new IllegalStateException("Profiler: no trace yet (start() and stop() first)");
        }
        return last;
    }

    /** Writes the last trace to {@code path} as Chrome trace event JSON ({@link Trace#writeChromeJson}). */
    public synchronized void export(Path path) throws IOException {
        trace().writeChromeJson(path);
    }

    /** The last trace's time per operator and per collective, as a table ({@link Trace#table()}). */
    public synchronized String table() {
        return trace().table();
    }
}
