package org.dtorch.benchmarks;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.trace.Tracer;

/**
 * What the tracer costs per operator (docs/observability.md): {@code add} of shape (1,) through the whole pipeline on a
 * one-device mesh with tracing off and on, rounds alternating in one runtime (each "on" round records a session of its
 * own, stopped and dropped after the round's {@code sync()}); and an operator's hooks alone (a start time and a record
 * call each for the enqueue, the dispatch and the kernel) against an empty loop, off and on: figures that the load of a
 * shared machine does not blur as much as the pipeline's.
 *
 * <p>Thread-safe: stateless; one harness runs at a time.
 */
final class TraceBenchmark {
    private static final int WARMUP_ROUNDS = 2;
    /** Calls of the off path's hooks per run, many so that a nanosecond shows. */
    private static final int HOOK_LOOPS = 20_000_000;
    /** Calls of the hooks per run with tracing on: each records three events, kept until the session stops. */
    private static final int RECORDING_LOOPS = 200_000;

    private TraceBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        int rounds = options.rounds() * 2;
        int perRound = options.iterations(PipelineBenchmark.SMALL_OPS_PER_ROUND);
        report.section("tracing's cost per operator", "trace",
            "Mean time per `add` (1,) over a round of " + Unit.count(perRound) + " operators (each result's handle closed at once), then `sync()`, "
                + "with tracing off and on; " + rounds + " rounds of each per run, alternating, after " + WARMUP_ROUNDS + " warm-up rounds. The "
                + "ratio is off / on. The client's and the worker's CPU time are measured in the same rounds: on a loaded machine the "
                + "wall time also counts the time a thread waited for a core.");
        Comparison wall = new Comparison("add (1,) through the pipeline, tracing on (baseline: off)", Goal.context("the difference below is the goal's"));
        Figure wallCost = new Figure("pipeline wall time per operator, on minus off (p50 of the rounds)", Unit.NANOS, Goal.atMost(1_000, Unit.NANOS));
        Figure clientCost = new Figure("client thread's CPU time per `add` issued, on minus off (p50 of the rounds)", Unit.NANOS,
            Goal.atMost(1_000, Unit.NANOS));
        Figure pipelineCpu = new Figure("client and worker threads' CPU time per operator, on minus off (p50 of the rounds)", Unit.NANOS,
            Goal.atMost(1_000, Unit.NANOS));
        Figure hooks = new Figure("tracing off: an operator's three hooks alone, minus an empty loop (CPU time)", Unit.NANOS,
            Goal.context("nothing measurable next to the operator"));
        Figure recording = new Figure(
            "tracing on: an operator's three hooks alone (three events recorded), minus an empty loop (CPU time, after a warm-up pass)",
            Unit.NANOS, Goal.atMost(1_000, Unit.NANOS));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                Samples off = new Samples("tracing off");
                Samples on = new Samples("tracing on");
                Samples offCpu = new Samples("client CPU, off");
                Samples onCpu = new Samples("client CPU, on");
                Samples offBoth = new Samples("client and worker CPU, off");
                Samples onBoth = new Samples("client and worker CPU, on");
                measure(dt, mesh, perRound, rounds, new Samples[] {off, offCpu, offBoth}, new Samples[] {on, onCpu, onBoth});
                wall.add(on, off);
                wallCost.add(on.p50() - off.p50());
                clientCost.add(onCpu.p50() - offCpu.p50());
                pipelineCpu.add(onBoth.p50() - offBoth.p50());
                hooks.add(hooksNanos(HOOK_LOOPS));
                for (boolean warmUp : new boolean[] {true, false}) {
                    Tracer.start();
                    try {
                        double nanos = hooksNanos(RECORDING_LOOPS);
                        if (!warmUp) {
                            recording.add(nanos);
                        }
                    } finally {
                        Tracer.stop();
                    }
                }
            }
        }
        report.comparisons(List.of(wall));
        report.figures(List.of(wallCost, clientCost, pipelineCpu, hooks, recording));
    }

    /**
     * Rounds of {@code add}s with tracing off and on, alternating; per round and per setting, {@code off} and {@code on}
     * get the wall time, the client thread's CPU time and the client's and worker's CPU time, each per operator.
     */
    private static void measure(DTorch dt, DeviceMesh mesh, int perRound, int rounds, Samples[] off, Samples[] on) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long worker = workerThreadId();
        try (DTensor a = dt.ones(new long[] {1}, mesh); DTensor b = dt.ones(new long[] {1}, mesh)) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                for (boolean traced : new boolean[] {false, true}) {
                    if (traced) {
                        Tracer.start();
                    }
                    long workerStart = threads.getThreadCpuTime(worker);
                    long cpuStart = threads.getCurrentThreadCpuTime();
                    long start = System.nanoTime();
                    for (int i = 0; i < perRound; i++) {
                        a.add(b).close();
                    }
                    long cpuNanos = threads.getCurrentThreadCpuTime() - cpuStart;
                    dt.sync();
                    long wallNanos = System.nanoTime() - start;
                    long workerNanos = threads.getThreadCpuTime(worker) - workerStart;
                    if (traced) {
                        Tracer.stop();
                    }
                    if (round >= 0) {
                        Samples[] into = traced ? on : off;
                        into[0].add(wallNanos / perRound);
                        into[1].add(cpuNanos / perRound);
                        into[2].add((cpuNanos + workerNanos) / perRound);
                    }
                }
            }
        }
    }

    /** The id of the one-device runtime's worker thread (named by {@code PerDeviceThreadNodeRunner}). */
    private static long workerThreadId() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("dtorch-worker-cpu:0"))
            .findFirst().orElseThrow(() -> new IllegalStateException("no thread named dtorch-worker-cpu:0")).threadId();
    }

    /**
     * The calling thread's CPU nanoseconds per operator of an operator's hooks, over {@code loops} operators, beyond an
     * empty loop's (CPU time, not wall time: on a loaded machine the wall time counts the time the thread waited for a core).
     */
    private static double hooksNanos(int loops) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        List<Long> devices = List.of(0L);
        long sink = 0;
        long start = threads.getCurrentThreadCpuTime();
        for (int i = 0; i < loops; i++) {
            sink += i;
        }
        long empty = threads.getCurrentThreadCpuTime() - start;
        start = threads.getCurrentThreadCpuTime();
        for (int i = 0; i < loops; i++) {
            long enqueued = Tracer.now();
            Tracer.enqueue(i, "add", devices, devices, enqueued);
            long dispatched = Tracer.now();
            Tracer.dispatch(i, "add", dispatched);
            long ran = Tracer.now();
            Tracer.kernel(i, "add", 0, ran);
            sink += i + enqueued + dispatched + ran;
        }
        long hooked = threads.getCurrentThreadCpuTime() - start;
        if (sink == 42) {
            System.out.print(""); // keeps sink alive
        }
        return (double) (hooked - empty) / loops;
    }
}
