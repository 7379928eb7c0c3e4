package org.dtorch.core.graph;

import java.util.concurrent.atomic.LongAdder;

/**
 * Optional per-stage accounting of the operator pipeline, for the pipeline benchmark's breakdown: time spent in
 * each stage and the number of times a pipeline thread parked. Off by default; when off, each stage pays one
 * read of a static field (the device loop reads it once per batch). Turn it on before the runtime starts (its threads then see the switch).
 *
 * <p>Thread-safe: stages are recorded from any thread; {@link #snapshotAndReset()} from any thread.
 */
public final class PipelineStages {
    /** The stages, in pipeline order. */
    public enum Stage {
        /** Client thread: the operator's output metadata ({@code OpSpec.inferOutputs}, or the memoized last one). */
        CLIENT_INFERENCE,
        /** Client thread: the whole {@code GraphConstructor.add}, inference and hand-off to the controller included. */
        CLIENT_ADD,
        /** Controller thread: adding one operator to the graph and handing it to its devices' queues. */
        CONTROLLER_DISPATCH,
        /** Worker thread: running one operator, the kernel included (binding inputs, storing outputs). */
        WORKER_EXECUTE,
        /** Worker thread: the kernel alone (the torch call). */
        KERNEL,
        /** Worker thread: releasing one operand's tensor (closing it: the counterpart of a direct call's close). */
        WORKER_RELEASE,
        /**
         * Worker thread: whole batches of work, from taking the batch to its end, counted per operator in them: all
         * the worker does for an operator, its releases and the graph's bookkeeping included.
         */
        WORKER_BUSY
    }

    private static volatile boolean enabled;
    private static final LongAdder[] NANOS = newAdders(Stage.values().length);
    private static final LongAdder[] COUNTS = newAdders(Stage.values().length);
    private static final LongAdder PARKS = new LongAdder();

    private PipelineStages() {
    }

    /** Turns the accounting on or off (and clears it). */
    public static void enable(boolean on) {
        snapshotAndReset();
        enabled = on;
    }

    /** True while the accounting is on; a loop may read it once per batch of work and time the batch's stages. */
    public static boolean enabled() {
        return enabled;
    }

    /** Adds {@code nanos} spent in {@code count} runs of {@code stage}. */
    public static void add(Stage stage, long nanos, int count) {
        NANOS[stage.ordinal()].add(nanos);
        COUNTS[stage.ordinal()].add(count);
    }

    /** A start time for {@link #end}, or 0 when the accounting is off. */
    public static long start() {
        return enabled ? System.nanoTime() : 0;
    }

    /** Adds the time since {@code start} to {@code stage}; nothing when {@code start} is 0. */
    public static void end(Stage stage, long start) {
        if (start != 0) {
            NANOS[stage.ordinal()].add(System.nanoTime() - start);
            COUNTS[stage.ordinal()].increment();
        }
    }

    /** Counts one park of a pipeline thread waiting for work (a wake-up someone else pays for). */
    public static void parked() {
        if (enabled) {
            PARKS.increment();
        }
    }

    /**
     * Totals since the last call.
     *
     * @param nanos  per stage, the time spent, in nanoseconds
     * @param counts per stage, how many times it ran
     * @param parks  how many times a pipeline thread parked
     */
    public record Totals(long[] nanos, long[] counts, long parks) {
        /** Mean nanoseconds per run of {@code stage}, or 0 if it never ran. */
        public double meanNanos(Stage stage) {
            long n = counts[stage.ordinal()];
            return n == 0 ? 0 : (double) nanos[stage.ordinal()] / n;
        }
    }

    /** The totals so far, which start again from zero. */
    public static Totals snapshotAndReset() {
        long[] nanos = new long[NANOS.length];
        long[] counts = new long[COUNTS.length];
        for (int i = 0; i < nanos.length; i++) {
            nanos[i] = NANOS[i].sumThenReset();
            counts[i] = COUNTS[i].sumThenReset();
        }
        return new Totals(nanos, counts, PARKS.sumThenReset());
    }

    private static LongAdder[] newAdders(int n) {
        LongAdder[] adders = new LongAdder[n];
        for (int i = 0; i < n; i++) {
            adders[i] = new LongAdder();
        }
        return adders;
    }
}
