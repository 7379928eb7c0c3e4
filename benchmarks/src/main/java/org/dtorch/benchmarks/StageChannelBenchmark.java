package org.dtorch.benchmarks;

import java.util.List;
import org.dtorch.api.ChannelEdge;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;

/**
 * A two-stage pipeline through the runtime in per-device-process mode: stage one ({@code [0, 1]}) computes, hands its
 * result to stage two ({@code [2, 3]}), which computes on it; with a declared edge ({@link DTorch#channel}) the hand-off
 * goes through a WorkerTensorChannel, without one through the ordinary cross-mesh path (a store where all four devices
 * meet), in the same run. Time per step: a round of steps issued, then {@code sync()}, divided by the steps; the two
 * variants alternate round by round.
 */
final class StageChannelBenchmark {
    private static final long ROWS = 1024;
    private static final long COLUMNS = 1024;
    private static final int STEPS = 40;
    private static final int WARMUP_ROUNDS = 2;
    private static final Placement S0 = Placement.shard(0);

    private StageChannelBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        int steps = options.iterations(STEPS);
        long rows = options.quick() ? 64 : ROWS;
        report.section("Pipeline-stage hand-off through the runtime", "stagechannel",
            "Four worker processes; stage one on devices [0, 1] and stage two on [2, 3]. A step: `x * 2` on stage one (a "
                + rows + " x " + COLUMNS + " float32 tensor, `S(0)` or `R`), `redistribute` onto stage two (`S(0)`), `relu` there. "
                + steps + " steps per round, then `sync()`; the sample is the round's time per step. Measured: with the edge "
                + "declared (`dt.channel(stage1, stage2)`); baseline: without (the ordinary cross-mesh path). " + options.rounds()
                + " rounds per variant and run, alternating, after " + WARMUP_ROUNDS + " warm-up rounds. Ratio: baseline p50 over "
                + "channel p50.");
        Comparison sharded = new Comparison("two-stage step from `S(0)`, channel vs ordinary path", Goal.context("context"));
        Comparison replicated = new Comparison("two-stage step from `R`, channel vs ordinary path", Goal.context("context"));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build())) {
            DeviceMesh first = dt.mesh(0, 1);
            DeviceMesh second = dt.mesh(2, 3);
            try (DTensor a = dt.randn(1, new long[] {rows, COLUMNS}, first, S0); DTensor r = dt.randn(1, new long[] {rows, COLUMNS}, first)) {
                for (int run = 0; run < options.runs(); run++) {
                    measure(dt, a, second, steps, options.rounds(), sharded);
                    measure(dt, r, second, steps, options.rounds(), replicated);
                }
            }
        }
        report.comparisons(List.of(sharded, replicated));
    }

    /** One run of {@code rounds} rounds per variant, alternating, after the warm-up, into {@code comparison}. */
    private static void measure(DTorch dt, DTensor a, DeviceMesh second, int steps, int rounds, Comparison comparison) {
        Samples viaChannel = new Samples("declared edge (WorkerTensorChannel)");
        Samples ordinary = new Samples("ordinary cross-mesh path");
        for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
            long withEdge;
            try (ChannelEdge edge = dt.channel(a.mesh(), second)) {
                withEdge = round(dt, a, second, steps);
            }
            long without = round(dt, a, second, steps);
            if (round >= 0) {
                viaChannel.add(withEdge);
                ordinary.add(without);
            }
        }
        comparison.add(viaChannel, ordinary);
    }

    /** One round: {@code steps} steps issued, then {@code sync()}; the time per step in nanoseconds. */
    private static long round(DTorch dt, DTensor a, DeviceMesh second, int steps) {
        dt.sync();
        long start = System.nanoTime();
        for (int i = 0; i < steps; i++) {
            try (DTensor x = a.mul(2.0); DTensor moved = x.redistribute(second, S0); DTensor y = moved.relu()) {
                // handles closed at once: the devices release the tensors once the step ran
            }
        }
        dt.sync();
        return (System.nanoTime() - start) / steps;
    }
}
