package org.dtorch.benchmarks;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.ops.BinarySpec;

/**
 * Per-operator cost of {@code add} through the whole pipeline (client, controller, worker) on a one-device
 * mesh, against calling Bytedeco torch directly in a loop (no runtime at all, the strongest baseline); and
 * the client-side cost of issuing an operator (what the client thread spends before it can go on). Each
 * sample is the mean over one round of many operators, then the result is waited for ({@code sync});
 * rounds alternate between the two variants, and each variant has its own operands.
 */
final class PipelineBenchmark {
    private static final int SMALL_OPS = 20_000;
    private static final int LARGE_OPS = 20;
    private static final long LARGE_BYTES = 64L * 1024 * 1024;
    private static final int WARMUP_ROUNDS = 2;

    private PipelineBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        int rounds = options.rounds() * 2;
        long side = (long) Math.sqrt(options.bytes(LARGE_BYTES) / (double) Float.BYTES);
        report.section("add through client, controller and worker (one-device mesh)", "pipeline",
            "Mean time per `add` over a round (" + Unit.count(options.iterations(SMALL_OPS)) + " small or " + LARGE_OPS + " large operators, each "
                + "result's handle closed at once), then `sync()`; baseline: the same `add` on Bytedeco torch directly, result closed. "
                + "Per run " + rounds + " rounds per variant, alternating, after " + WARMUP_ROUNDS + " warm-up rounds; each variant has its own operands. The ratio is "
                + "direct / pipeline: 1 means no overhead, and \"at most 1.2x\" means a ratio of at least 0.83.");
        Comparison small = new Comparison("add, shape (1,)", new Goal("at most 1.2x (ratio >= 0.83)", Goal.Target.RATIO, r -> r >= 0.83));
        Comparison large = new Comparison("add, " + side + " x " + side + " float32", Goal.ratioAtLeast(0.95));
        Figure clientCpu = new Figure("client thread's CPU time per `add` issued (p50 of the rounds)", Unit.NANOS, Goal.atMost(1_000, Unit.NANOS));
        Figure clientWall = new Figure("client thread's wall time per `add` issued, controller and worker running beside it (p50 of the rounds)",
            Unit.NANOS, Goal.context("context"));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                measure(dt, mesh, small, new long[] {1}, options.iterations(SMALL_OPS), rounds);
                measure(dt, mesh, large, new long[] {side, side}, LARGE_OPS, rounds);
                enqueue(dt, mesh, clientCpu, clientWall, options.iterations(SMALL_OPS), rounds);
            }
        }
        report.comparisons(List.of(small, large));
        report.note("Client-side cost of issuing one `add` (metadata inference, operand and operator, queueing, the handle and its "
            + "`Cleaner`, and the release when the handle is closed):");
        report.figures(List.of(clientCpu, clientWall));
    }

    /** One run of the pipeline against direct torch. */
    private static void measure(DTorch dt, DeviceMesh mesh, Comparison row, long[] shape, int perRound, int rounds) {
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
                    a.add(b).close();
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
