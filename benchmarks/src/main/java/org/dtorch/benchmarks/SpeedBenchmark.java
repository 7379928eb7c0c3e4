package org.dtorch.benchmarks;

import java.util.List;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;

/**
 * The collective-speed goals in one run, each against its baseline measured in the same run: the Gloo
 * all-reduce through {@code ThreadGroup} against direct {@code ProcessGroupGloo} on a copy and in place, the
 * same-device all-reduce against direct Gloo and its bandwidth against a single-thread memcpy, the pipeline's
 * per-operator cost against direct torch (with its per-stage breakdown), and the parked wake-ups against the JDK's
 * park and a bare futex. docs/benchmarks.md records the figures and the command.
 *
 * <p>Thread-safe: stateless; the harness thread runs it.
 */
final class SpeedBenchmark {

    private SpeedBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("Collective speed: all-reduce, per operator, wake-ups", "speed",
            "Rows 1 to 4: all-reduce (SUM) of " + Unit.size(options.bytes(64L << 20)) + " float32 over 4 ranks in threads, as the "
                + "`allreduce` harness measures it (ranks released together, variants interleaved in rounds, rank 0's time). Row 5: "
                + "`add` of shape (1,) through the pipeline against direct torch, as the `pipeline` harness. Rows 6 and 7: a getter "
                + "blocked long enough to sleep (1 ms in-process, 2 ms across processes) against the JDK's `CompletableFuture` and "
                + "against a bare futex wake-up between two processes; the in-process getter is one long-lived thread that blocks once per "
                + "wake-up, as a runtime's client or worker does; the File promise is made with its value's shape and dtype, as `get_tensor` "
                + "makes it. "
                + "Row 8 (secondary): row 6 with a new getter thread per wake-up. Row 9 (secondary): row 7 without the value's shape.");
        AllReduceBenchmark.Rows allReduce = AllReduceBenchmark.measure(options);
        Comparison perOperator = new Comparison("add, shape (1,), through the pipeline",
            new Goal("at most 1.2x (ratio >= 0.83)", Goal.Target.RATIO, r -> r >= 0.83));
        List<Figure> stages;
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            int perRound = options.iterations(PipelineBenchmark.SMALL_OPS_PER_ROUND);
            for (int run = 0; run < options.runs(); run++) {
                PipelineBenchmark.measure(dt, dt.defaultMesh(), perOperator, new long[] {1}, perRound, options.rounds() * 2);
            }
            stages = PipelineBenchmark.breakdown(dt, dt.defaultMesh(), perRound, options.rounds(), options.runs());
        }
        List<Comparison> parked = FutureWakeupBenchmark.parked(options);
        List<Comparison> sleeping = ProcessBenchmark.sleepingPromiseAgainstFutex(options);
        // One table here; in docs/benchmarks.md each row goes to its area.
        parked.forEach(c -> c.inArea(DocsTable.COMMUNICATION_CORE));
        sleeping.forEach(c -> c.inArea(DocsTable.WORKER_PROCESSES));
        List<Comparison> rows = new java.util.ArrayList<>(allReduce.comparisons());
        rows.add(perOperator.inArea(DocsTable.PER_OPERATOR));
        rows.add(parked.getFirst());
        rows.add(sleeping.getFirst());
        rows.add(parked.getLast());
        rows.add(sleeping.getLast());
        report.comparisons(rows);
        report.note("Same-device all-reduce bandwidth (every input read once, every output written once) against one thread's memcpy:");
        report.figures(allReduce.figures());
        report.note("Per-stage breakdown of one `add` (1,) (accounting on; see the `pipeline` harness):");
        report.figures(stages);
    }
}
