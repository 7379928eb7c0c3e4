package org.dtorch.benchmarks;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * Per-operator cost of {@code add} through the whole pipeline (client, controller, worker) on a one-device
 * mesh, against calling Bytedeco torch directly in a loop; and the client-side cost of issuing an operator
 * (what the client thread spends before it can go on). Each sample is the mean over one round of many
 * operators, then the result is waited for ({@code sync}); rounds alternate between the two variants.
 */
final class PipelineBenchmark {
    private static final int ROUNDS = Integer.getInteger("bench.rounds", 6) * 2;

    private PipelineBenchmark() {
    }

    static void run(Report report) throws Exception {
        report.section("Pipeline: add through client, controller and worker (1 device)",
            "Mean time per `add` over a round of operators, results dropped as they are made, then `sync()`; baseline: the same "
                + "`add`s called on Bytedeco torch directly, results closed.");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            measure(report, dt, mesh, "add, shape (1,)", new long[] {1}, 20_000);
            measure(report, dt, mesh, "add, 4096 x 4096 float32", new long[] {4096, 4096}, 20);
            Samples enqueue = new Samples("(none)", ROUNDS);
            Samples enqueueCpu = new Samples("(none)", ROUNDS);
            java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
            DTensor a = dt.ones(new long[] {1}, mesh);
            DTensor b = dt.ones(new long[] {1}, mesh);
            int n = 20_000;
            for (int round = -2; round < ROUNDS; round++) {
                long cpuStart = threads.getCurrentThreadCpuTime();
                long start = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    dt.apply(org.dtorch.ops.BinarySpec.ADD, a, b).close();
                }
                long elapsed = System.nanoTime() - start;
                long cpu = threads.getCurrentThreadCpuTime() - cpuStart;
                dt.sync();
                if (round >= 0) {
                    enqueue.add(elapsed / n);
                    enqueueCpu.add(cpu / n);
                }
            }
            report.note(String.format(java.util.Locale.ROOT,
                "Client-side cost of issuing one `add` (inference, queueing, handle, release): CPU time of the client thread p50 %s, "
                    + "p99 %s; wall time, with the controller and worker running beside it, p50 %s, p99 %s (goal: at most 1 us).",
                Samples.format(enqueueCpu.p50()), Samples.format(enqueueCpu.p99()), Samples.format(enqueue.p50()), Samples.format(enqueue.p99())));
        }
    }

    private static void measure(Report report, DTorch dt, DeviceMesh mesh, String label, long[] shape, int perRound) throws Exception {
        Samples direct = new Samples("direct Bytedeco torch", ROUNDS);
        Samples through = new Samples("pipeline", ROUNDS);
        try (Tensor x = torch.ones(shape); Tensor y = torch.ones(shape)) {
            DTensor a = dt.tensor(x, mesh);
            DTensor b = dt.tensor(y, mesh);
            dt.sync();
            for (int round = -2; round < ROUNDS; round++) { // two warm-up rounds
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
            a.close();
            b.close();
        }
        report.row(label, through, direct, "pipeline at most 1.2x direct (ratio >= 0.83) for the small case, equal for the large");
    }
}
