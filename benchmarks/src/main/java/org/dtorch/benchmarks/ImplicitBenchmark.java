package org.dtorch.benchmarks;

import java.util.List;
import java.util.function.BiFunction;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;

/**
 * What implicit redistribution costs where nothing moves, and what an in-place write of one row costs.
 *
 * <ul>
 *   <li><b>Fits already</b>: {@code add} of two {@code [S(0)]} tensors on 4 devices, whose placements fit, issued
 *       {@value #OPS_PER_SAMPLE} times then waited for, with implicit redistribution on (the operator's placements are
 *       chosen, and found to fit) against the strict mode (no choice is made: the operator checks its inputs itself, the
 *       path every operator took before implicit redistribution), for the hand-written {@code DTensor.add} and the
 *       generic {@code DTorch.aten} ({@code aten::add.Tensor}).</li>
 *   <li><b>One-row write</b>: {@code cache[i] = row} into a {@code [4096, 1024]} float32 cache on 4 devices, sharded
 *       {@code [S(0)]} (one device writes the row) or {@code [S(1)]} (every device writes its columns of it), against
 *       {@code copy_} of a whole tensor of the cache's shape and placements into it (each device copies its shard), each
 *       issued and waited for.</li>
 * </ul>
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class ImplicitBenchmark {
    static final int OPS_PER_SAMPLE = 200;
    private static final long[] CACHE = {4096, 1024};
    private static final int WARMUP_ROUNDS = 2;

    private ImplicitBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        int ops = options.iterations(OPS_PER_SAMPLE);
        long[] cache = options.quick() ? new long[] {256, 64} : CACHE;
        report.section("Implicit redistribution where inputs fit, and one-row in-place writes", "implicit",
            "Rows 1 and 2: `add` of two float32 (4096,) tensors sharded [S(0)] on 4 CPU devices in threads (their placements fit), "
                + ops + " issued then `sync()`, per sample; measured: implicit redistribution on (the default: the operator's placements "
                + "are chosen and found to fit); baseline: the strict mode, where no choice is made and the operator checks its inputs "
                + "itself (the path before implicit redistribution). Row 1 the hand-written `DTensor.add`, row 2 the generic `DTorch.aten` "
                + "(`aten::add.Tensor`). Rows 3 and 4: `cache.setItem(row, Index.at(i))` of one [1, " + cache[1] + "] row (replicated) "
                + "into a float32 " + cache[0] + " x " + cache[1] + " cache on 4 devices, issued and waited for; baseline: `copy_` of a "
                + "whole tensor of the cache's shape and placements into it. Per run " + options.rounds() + " rounds, the variants "
                + "alternating, after " + WARMUP_ROUNDS + " warm-up rounds.");
        Comparison handWritten = new Comparison("fits already: DTensor.add, [S(0)] + [S(0)]", Goal.ratioAtLeast(0.98));
        Comparison generic = new Comparison("fits already: DTorch.aten add, [S(0)] + [S(0)]", Goal.ratioAtLeast(0.98));
        Comparison rowsSharded = new Comparison("one-row write into a [S(0)] cache", Goal.context("context"));
        Comparison columnsSharded = new Comparison("one-row write into a [S(1)] cache", Goal.context("context"));
        AtenCall add = AtenCall.of("add", "T,T", null, null);
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            for (int run = 0; run < options.runs(); run++) {
                fits(dt, mesh, handWritten, ops, options.rounds(), DTensor::add);
                fits(dt, mesh, generic, ops, options.rounds(), (a, b) -> dt.aten(add, a, b).getFirst());
                oneRow(dt, mesh, rowsSharded, cache, options.rounds(), Placement.shard(0));
                oneRow(dt, mesh, columnsSharded, cache, options.rounds(), Placement.shard(1));
            }
        }
        report.comparisons(List.of(handWritten, generic, rowsSharded, columnsSharded));
    }

    private static void fits(DTorch dt, DeviceMesh mesh, Comparison row, int ops, int rounds, BiFunction<DTensor, DTensor, DTensor> op) {
        Samples implicit = new Samples("implicit redistribution on");
        Samples strict = new Samples("strict mode (no choice made)");
        try (DTensor a = dt.randn(1, new long[] {4096}, mesh, Placement.shard(0));
             DTensor b = dt.randn(2, new long[] {4096}, mesh, Placement.shard(0))) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                boolean implicitFirst = (round & 1) == 0;
                long first = issue(dt, a, b, ops, op, implicitFirst);
                long second = issue(dt, a, b, ops, op, !implicitFirst);
                if (round >= 0) {
                    implicit.add(implicitFirst ? first : second);
                    strict.add(implicitFirst ? second : first);
                }
            }
        } finally {
            dt.setImplicitRedistribution(true);
        }
        row.add(implicit, strict);
    }

    private static long issue(DTorch dt, DTensor a, DTensor b, int ops, BiFunction<DTensor, DTensor, DTensor> op, boolean implicit) {
        dt.setImplicitRedistribution(implicit);
        long start = System.nanoTime();
        for (int i = 0; i < ops; i++) {
            op.apply(a, b).close();
        }
        dt.sync();
        return System.nanoTime() - start;
    }

    private static void oneRow(DTorch dt, DeviceMesh mesh, Comparison row, long[] shape, int rounds, Placement placement) {
        Samples write = new Samples("one-row setItem");
        Samples copy = new Samples("copy_ of the whole cache");
        try (DTensor cache = dt.zeros(shape, mesh, placement); DTensor whole = dt.ones(shape, mesh, placement);
             DTensor value = dt.ones(new long[] {1, shape[1]}, mesh, Placement.replicate())) {
            dt.sync();
            for (int round = -WARMUP_ROUNDS; round < rounds; round++) {
                long position = Math.floorMod(round * 37L, shape[0]);
                boolean writeFirst = (round & 1) == 0;
                long c = writeFirst ? 0 : copy(dt, cache, whole);
                long start = System.nanoTime();
                cache.setItem(value, Index.at(position));
                dt.sync();
                long w = System.nanoTime() - start;
                c = writeFirst ? copy(dt, cache, whole) : c;
                if (round >= 0) {
                    write.add(w);
                    copy.add(c);
                }
            }
        }
        row.add(write, copy);
    }

    private static long copy(DTorch dt, DTensor cache, DTensor whole) {
        long start = System.nanoTime();
        cache.copy_(whole);
        dt.sync();
        return System.nanoTime() - start;
    }
}
