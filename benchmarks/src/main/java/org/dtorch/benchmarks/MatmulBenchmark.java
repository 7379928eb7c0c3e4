package org.dtorch.benchmarks;

import java.util.List;
import java.util.function.BinaryOperator;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.MatmulSpec;

/**
 * A 4096 x 4096 float32 {@code matmul} on a 2-device mesh through the generic operator ({@code DTensor.matmul}:
 * {@code DTorch.aten} with the matmul strategy) against the hand-written {@code MatmulSpec} it replaces, in two layouts
 * that need no communication: rows sharded ({@code S(0) x R -> S(0)}) and the contracted dimension sharded
 * ({@code S(1) x S(0) -> P(sum)}). Each sample is one product issued and waited for ({@code sync}); the variants
 * alternate, and so does which of them goes first in a round; each has operands of its own.
 */
final class MatmulBenchmark {
    private static final long SIDE = 4096;
    private static final int WARMUP_ROUNDS = 1;

    private MatmulBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        long side = options.quick() ? 256 : SIDE;
        int rounds = options.rounds();
        report.section("matmul through the generic operator (issue 12)", "matmul",
            "One " + side + " x " + side + " float32 `matmul` on a 2-device CPU mesh, issued then waited for (`sync()`), result closed; "
                + "measured: `DTensor.matmul` (the generic ATen operator under the matmul strategy); baseline: the hand-written `MatmulSpec` "
                + "(`dt.apply(MatmulSpec.INSTANCE, a, b)`). Per run " + rounds + " rounds per variant, alternating (which goes first alternates too), after " + WARMUP_ROUNDS
                + " warm-up round; each variant has its own operands. Ratio: hand-written / generic, at least 1 when the generic path is "
                + "not slower (goal: within the noise, ratio >= 0.95).");
        Comparison rows = new Comparison("S(0) x R -> S(0)", Goal.ratioAtLeast(0.95));
        Comparison inner = new Comparison("S(1) x S(0) -> P(sum)", Goal.ratioAtLeast(0.95));
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                measure(dt, mesh, rows, side, rounds, Placement.shard(0), Placement.replicate());
                measure(dt, mesh, inner, side, rounds, Placement.shard(1), Placement.shard(0));
            }
        }
        report.comparisons(List.of(rows, inner));
    }

    /** One run: the generic and the hand-written product on operands of {@code pa} and {@code pb}, alternating. */
    private static void measure(DTorch dt, DeviceMesh mesh, Comparison row, long side, int rounds, Placement pa, Placement pb) {
        Samples generic = new Samples("generic");
        Samples handWritten = new Samples("hand-written `MatmulSpec`");
        try (Tensor x = torch.rand(side, side); Tensor w = torch.rand(side, side);
             DTensor a = dt.tensor(x, mesh, pa); DTensor b = dt.tensor(w, mesh, pb);
             DTensor c = dt.tensor(x, mesh, pa); DTensor d = dt.tensor(w, mesh, pb)) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                boolean genericFirst = (round & 1) == 0;
                long h = genericFirst ? 0 : time(dt, c, d, (p, q) -> dt.apply(MatmulSpec.INSTANCE, p, q));
                long g = time(dt, a, b, DTensor::matmul);
                h = genericFirst ? time(dt, c, d, (p, q) -> dt.apply(MatmulSpec.INSTANCE, p, q)) : h;
                if (round >= 0) {
                    generic.add(g);
                    handWritten.add(h);
                }
            }
        }
        row.add(generic, handWritten);
    }

    private static long time(DTorch dt, DTensor a, DTensor b, BinaryOperator<DTensor> product) {
        long start = System.nanoTime();
        product.apply(a, b).close();
        dt.sync();
        return System.nanoTime() - start;
    }
}
