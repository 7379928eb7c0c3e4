package org.dtorch.benchmarks;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;

/**
 * A 4096 x 4096 float32 {@code matmul} on a 2-device mesh through the generic operator ({@code DTensor.matmul}:
 * {@code DTorch.aten} with the matmul strategy) in two layouts that need no communication, rows sharded
 * ({@code S(0) x R -> S(0)}) and the contracted dimension sharded ({@code S(1) x S(0) -> P(sum)}), against Bytedeco's
 * {@code torch.matmul} of the whole operands on the benchmark thread (the same work on one device, libtorch's intra-op
 * threads on every core). Each sample is one product issued and waited for ({@code sync}); the variants alternate, and
 * so does which of them goes first in a round; each has operands of its own.
 */
final class MatmulBenchmark {
    private static final long SIDE = 4096;
    private static final int WARMUP_ROUNDS = 1;

    private MatmulBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        long side = options.quick() ? 256 : SIDE;
        int rounds = options.rounds();
        report.section("matmul through the generic operator", "matmul",
            "One " + side + " x " + side + " float32 `matmul` on a 2-device CPU mesh, issued then waited for (`sync()`), result closed; "
                + "measured: `DTensor.matmul` (the generic ATen operator under the matmul strategy); baseline: Bytedeco's `torch.matmul` of "
                + "the whole operands on the benchmark thread, result closed. Per run " + rounds + " rounds per variant, alternating (which "
                + "goes first alternates too), after " + WARMUP_ROUNDS + " warm-up round; each variant has its own operands. Ratio: one "
                + "device / generic on two (the same cores either way).");
        Comparison rows = new Comparison("S(0) x R -> S(0)", Goal.context("context"));
        Comparison inner = new Comparison("S(1) x S(0) -> P(sum)", Goal.context("context"));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                measure(dt, mesh, rows, side, rounds, Placement.shard(0), Placement.replicate());
                measure(dt, mesh, inner, side, rounds, Placement.shard(1), Placement.shard(0));
            }
        }
        report.comparisons(List.of(rows, inner));
    }

    /** One run: the generic product on operands of {@code pa} and {@code pb} and torch's on whole ones, alternating. */
    private static void measure(DTorch dt, DeviceMesh mesh, Comparison row, long side, int rounds, Placement pa, Placement pb) {
        Samples generic = new Samples("generic");
        Samples direct = new Samples("Bytedeco `torch.matmul`, one device");
        try (Tensor x = torch.rand(side, side); Tensor w = torch.rand(side, side);
             Tensor y = torch.rand(side, side); Tensor v = torch.rand(side, side);
             DTensor a = dt.tensor(x, mesh, pa); DTensor b = dt.tensor(w, mesh, pb)) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                boolean genericFirst = (round & 1) == 0;
                long d = genericFirst ? 0 : direct(y, v);
                long start = System.nanoTime();
                a.matmul(b).close();
                dt.sync();
                long g = System.nanoTime() - start;
                d = genericFirst ? direct(y, v) : d;
                if (round >= 0) {
                    generic.add(g);
                    direct.add(d);
                }
            }
        }
        row.add(generic, direct);
    }

    private static long direct(Tensor a, Tensor b) {
        long start = System.nanoTime();
        torch.matmul(a, b).close();
        return System.nanoTime() - start;
    }
}
