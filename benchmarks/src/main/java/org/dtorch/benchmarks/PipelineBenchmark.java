package org.dtorch.benchmarks;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import java.util.function.BinaryOperator;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.PipelineStages;
import org.dtorch.ops.BinarySpec;
import org.dtorch.ops.aten.AtenCall;

/**
 * Per-operator cost of {@code add} through the whole pipeline (client, controller, worker) on a one-device
 * mesh, against calling Bytedeco torch directly in a loop (no runtime at all, the strongest baseline); and
 * the client-side cost of issuing an operator (what the client thread spends before it can go on). Each
 * sample is the mean over one round of many operators, then the result is waited for ({@code sync});
 * rounds alternate between the two variants, and each variant has its own operands.
 *
 * <p>Like for like: per operator both loops make one result tensor and one JavaCPP handle and free
 * both; the direct loop closes its result at once, the pipeline's closed handle sends a release that the worker
 * carries out with the same {@code close()}.
 */
final class PipelineBenchmark {
    private static final int SMALL_OPS = 20_000;
    private static final int LARGE_OPS = 20;
    private static final long LARGE_BYTES = 64L * 1024 * 1024;
    static final int SMALL_OPS_PER_ROUND = SMALL_OPS;
    private static final int WARMUP_ROUNDS = 2;

    private PipelineBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        int rounds = options.rounds() * 2;
        long side = (long) Math.sqrt(options.bytes(LARGE_BYTES) / (double) Float.BYTES);
        report.section("add through client, controller and worker (one-device mesh)", "pipeline",
            "Mean time per `add` over a round (" + Unit.count(options.iterations(SMALL_OPS)) + " small or " + LARGE_OPS + " large operators, each "
                + "result's handle closed at once), then `sync()`; baseline: the same `add` on Bytedeco torch directly, result closed. "
                + "Per run " + rounds + " rounds per variant, alternating, after " + WARMUP_ROUNDS + " warm-up rounds; each variant has "
                + "its own operands. The ratio is "
                + "direct / pipeline: 1 means no overhead, and \"at most 1.2x\" means a ratio of at least 0.83.");
        Comparison small = new Comparison("add, shape (1,)", new Goal("at most 1.2x (ratio >= 0.83)", Goal.Target.RATIO, r -> r >= 0.83));
        Comparison large = new Comparison("add, " + side + " x " + side + " float32", Goal.ratioAtLeast(0.95));
        Comparison generic = new Comparison("add, shape (1,), through the generic operator (`aten::add.Tensor`)",
            Goal.context("the hand-written spec's row above is the goal's"));
        AtenCall add = AtenCall.of("add", "T,T");
        Figure clientCpu = new Figure("client thread's CPU time per `add` issued (p50 of the rounds)", Unit.NANOS, Goal.atMost(1_000, Unit.NANOS));
        Figure clientWall = new Figure("client thread's wall time per `add` issued, controller and worker running beside it (p50 of the rounds)",
            Unit.NANOS, Goal.context("context"));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                measure(dt, mesh, small, new long[] {1}, options.iterations(SMALL_OPS), rounds);
                measure(dt, mesh, large, new long[] {side, side}, LARGE_OPS, rounds);
                measure(dt, mesh, generic, new long[] {1}, options.iterations(SMALL_OPS), rounds, (a, b) -> dt.aten(add, a, b).getFirst());
                enqueue(dt, mesh, clientCpu, clientWall, options.iterations(SMALL_OPS), rounds);
            }
        }
        report.comparisons(List.of(small, large, generic));
        report.note("Client-side cost of issuing one `add` (metadata inference, operand and operator, queueing, the handle and its "
            + "`Cleaner`, and the release when the handle is closed):");
        report.figures(List.of(clientCpu, clientWall));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            report.note("Where the time of one `add` (1,) goes, from a separate pass with the per-stage accounting on (`PipelineStages`; "
                + "it adds a clock read per stage). In thread mode the client's thread dispatches, so two threads run: the "
                + "client (its busy time is the issuing loop's, close and release included) and the worker (its batches, timed whole). "
                + "The wall time per operator is bounded by the busier of the two, not their sum; what it has beyond that is lost in "
                + "hand-offs. The worker's release is the counterpart of the direct loop's `close()`, which the direct figure includes:");
            report.figures(breakdown(dt, dt.defaultMesh(), options.iterations(SMALL_OPS), rounds, options.runs()));
        }
    }

    /**
     * The per-stage breakdown of {@code add} on shape (1,): {@code runs} runs of {@code rounds} rounds of {@code perRound}
     * operators with the stage accounting on, each figure the mean per operator over a run.
     */
    static List<Figure> breakdown(DTorch dt, DeviceMesh mesh, int perRound, int rounds, int runs) {
        Figure direct = new Figure("direct torch `add`, result closed (the floor)", Unit.NANOS, Goal.context("baseline"));
        Figure wall = new Figure("pipeline wall time per operator, accounting on", Unit.NANOS, Goal.context("measured"));
        Figure inference = new Figure("client: metadata inference", Unit.NANOS, Goal.context("client thread"));
        Figure client = new Figure("client: whole add (inference, operands, operator, dispatch)", Unit.NANOS, Goal.context("client thread"));
        Figure controller = new Figure("dispatch: graph add and queueing to the device (on the client's thread in thread mode)",
            Unit.NANOS, Goal.context("client thread"));
        Figure clientLoop = new Figure("client: busy per operator (add, the handle, its close and release)", Unit.NANOS,
            Goal.context("client thread"));
        Figure workerBusy = new Figure("worker: busy per operator (everything it does)", Unit.NANOS, Goal.context("worker thread"));
        Figure kernel = new Figure("worker: kernel (the torch call)", Unit.NANOS, Goal.context("worker thread"));
        Figure release = new Figure("worker: release (closing the result: the direct loop's close)", Unit.NANOS, Goal.context("worker thread"));
        Figure worker = new Figure("worker: the rest (queue, inputs, outputs, blob table, bookkeeping)", Unit.NANOS, Goal.context("worker thread"));
        Figure handoffs = new Figure("hand-offs: wall time beyond the busiest thread", Unit.NANOS, Goal.context("queues and wake-ups"));
        Figure parks = new Figure("pipeline threads parked, per 1000 operators", Unit.RATIO, Goal.context("wake-ups paid"));
        try (Tensor x = torch.ones(1); Tensor y = torch.ones(1); DTensor a = dt.ones(new long[] {1}, mesh); DTensor b = dt.ones(new long[] {1}, mesh)) {
            dt.sync();
            for (int run = 0; run < runs; run++) {
                long directNanos = 0;
                long wallNanos = 0;
                long issueNanos = 0;
                PipelineStages.enable(true);
                for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                    if (round == 0) {
                        PipelineStages.snapshotAndReset();
                        directNanos = 0;
                        wallNanos = 0;
                        issueNanos = 0;
                    }
                    long start = System.nanoTime();
                    for (int i = 0; i < perRound; i++) {
                        x.add(y).close();
                    }
                    directNanos += System.nanoTime() - start;
                    start = System.nanoTime();
                    for (int i = 0; i < perRound; i++) {
                        a.add(b).close();
                    }
                    issueNanos += System.nanoTime() - start;
                    dt.sync();
                    wallNanos += System.nanoTime() - start;
                }
                PipelineStages.Totals totals = PipelineStages.snapshotAndReset();
                PipelineStages.enable(false);
                long ops = (long) perRound * rounds;
                double busy = totals.meanNanos(PipelineStages.Stage.WORKER_BUSY);
                double kernelNanos = totals.meanNanos(PipelineStages.Stage.KERNEL);
                // One release per operator: the result's handle is closed at once.
                double releaseNanos = totals.meanNanos(PipelineStages.Stage.WORKER_RELEASE);
                double clientPerOp = (double) issueNanos / ops;
                double perOp = (double) wallNanos / ops;
                direct.add((double) directNanos / ops);
                wall.add(perOp);
                inference.add(totals.meanNanos(PipelineStages.Stage.CLIENT_INFERENCE));
                client.add(totals.meanNanos(PipelineStages.Stage.CLIENT_ADD));
                controller.add(totals.meanNanos(PipelineStages.Stage.CONTROLLER_DISPATCH));
                clientLoop.add(clientPerOp);
                workerBusy.add(busy);
                kernel.add(kernelNanos);
                release.add(releaseNanos);
                worker.add(busy - kernelNanos - releaseNanos);
                handoffs.add(perOp - Math.max(clientPerOp, busy));
                parks.add(1000.0 * totals.parks() / ops);
            }
        } finally {
            PipelineStages.enable(false);
        }
        return List.of(direct, wall, inference, client, controller, clientLoop, workerBusy, kernel, release, worker, handoffs, parks);
    }

    /** One run of the pipeline against direct torch. */
    static void measure(DTorch dt, DeviceMesh mesh, Comparison row, long[] shape, int perRound, int rounds) {
        measure(dt, mesh, row, shape, perRound, rounds, DTensor::add);
    }

    /** As {@link #measure(DTorch, DeviceMesh, Comparison, long[], int, int)}, issuing {@code add} as {@code op} does. */
    static void measure(DTorch dt, DeviceMesh mesh, Comparison row, long[] shape, int perRound, int rounds,
        BinaryOperator<DTensor> op) {
        Samples direct = new Samples("direct Bytedeco torch");
        Samples through = new Samples("pipeline");
        try (Tensor x = torch.ones(shape); Tensor y = torch.ones(shape);
             DTensor a = dt.ones(shape, mesh); DTensor b = dt.ones(shape, mesh)) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                long start = System.nanoTime();
                for (int i = 0; i < perRound; i++) {
                    x.add(y).close();
                }
                long directNanos = (System.nanoTime() - start) / perRound;
                start = System.nanoTime();
                for (int i = 0; i < perRound; i++) {
                    op.apply(a, b).close();
                }
                dt.sync();
                long pipelineNanos = (System.nanoTime() - start) / perRound;
                if (round >= 0) {
                    direct.add(directNanos);
                    through.add(pipelineNanos);
                }
            }
        }
        row.add(through, direct);
    }

    /** One run of the client-side cost: the client thread's CPU and wall time per operator issued. */
    private static void enqueue(DTorch dt, DeviceMesh mesh, Figure cpu, Figure wall, int perRound, int rounds) {
        ClientCost cost = clientCost(dt, mesh, perRound, WARMUP_ROUNDS, rounds);
        cpu.add(cost.cpu().p50());
        wall.add(cost.wall().p50());
    }

    /** Per round, the client thread's mean wall and CPU time per {@code add} issued. */
    record ClientCost(Samples wall, Samples cpu) {
    }

    /**
     * The client-side cost of issuing {@code add}s of shape (1,) on {@code mesh}: {@code warmup} unrecorded rounds,
     * then {@code rounds} recorded ones of {@code perRound} operators, each round followed by {@code sync()}.
     */
    static ClientCost clientCost(DTorch dt, DeviceMesh mesh, int perRound, int warmup, int rounds) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        ClientCost cost = new ClientCost(new Samples("Java client, same `add`"), new Samples("Java client, CPU"));
        try (DTensor a = dt.ones(new long[] {1}, mesh); DTensor b = dt.ones(new long[] {1}, mesh)) {
            for (int round = -warmup; round < rounds; round++) {
                long cpuStart = threads.getCurrentThreadCpuTime();
                long start = System.nanoTime();
                for (int i = 0; i < perRound; i++) {
                    dt.apply(BinarySpec.ADD, a, b).close();
                }
                long elapsed = System.nanoTime() - start;
                long cpuNanos = threads.getCurrentThreadCpuTime() - cpuStart;
                dt.sync();
                if (round >= 0) {
                    cost.wall().add(elapsed / perRound);
                    cost.cpu().add(cpuNanos / perRound);
                }
            }
        }
        return cost;
    }
}
