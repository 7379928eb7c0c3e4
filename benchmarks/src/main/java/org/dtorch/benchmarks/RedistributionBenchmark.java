package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.kernel.ConvertKernel;
import org.dtorch.core.kernel.KernelContext;

/**
 * Redistribution of a 64 MiB float32 tensor on a 4-device CPU mesh (Gloo): {@code ConvertKernel} with a
 * plan looked up in the planner's cache on every call, against the bare {@code ThreadGroup} collective the
 * plan reduces to. The goal is the cost of the layer on top of the communication core, so the baseline is
 * the core's own call; how that call compares with Gloo called directly is the all-reduce table's row.
 * Variants are interleaved in rounds and each has its own local shards, checked unchanged afterwards.
 */
final class RedistributionBenchmark {
    private static final int WORLD = 4;
    private static final long FULL_BYTES = 64L * 1024 * 1024;
    private static final int PER_ROUND = 3;
    private static final int PLANNING_CALLS = 100_000;

    private RedistributionBenchmark() {
    }

    private record Case(String name, Placement from, Placement to, String collective, Function<Args, Tensor> bare) {
    }

    private record Args(ThreadGroup group, Tensor local, long dim0) {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long side = (long) Math.sqrt(options.bytes(FULL_BYTES) / (double) Float.BYTES);
        long[] shape = {side, side};
        report.section("Redistribution, 4-device CPU mesh (Gloo), " + side + " x " + side + " float32", "redistribute",
            "Rank 0's time per redistribution: `ConvertKernel.of(source, target, shape)` (plan taken from the cache on every call) then "
                + "`run`, against the bare `ThreadGroup` collective the plan reduces to; per run " + options.rounds() * PER_ROUND
                + " samples per variant, interleaved in rounds, after a warm-up round. Each variant has its own local shards. The goal is "
                + "the cost of the layer on top of the communication core, so the baseline is the core's own call; how that call "
                + "compares with Gloo called directly is the all-reduce table's first row.");
        DeviceMesh mesh = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
        List<Long> ids = mesh.deviceIds();
        List<Case> cases = List.of(
            new Case("S(0) -> R", Placement.shard(0), Placement.replicate(), "allGather", a -> a.group().allGather(a.local(), 0, a.dim0())),
            new Case("P -> R", Placement.partial(), Placement.replicate(), "allReduce", a -> a.group().allReduce(a.local(), ReduceOpType.SUM)),
            new Case("S(0) -> S(1)", Placement.shard(0), Placement.shard(1), "allToAll", a -> a.group().allToAll(a.local(), 0, 1, a.dim0())),
            new Case("P -> S(0)", Placement.partial(), Placement.shard(0), "reduceScatterTensor",
                a -> a.group().reduceScatterTensor(a.local(), ReduceOpType.SUM)));
        List<Comparison> rows = new ArrayList<>();
        try (RankPool pool = new RankPool(WORLD);
             ThreadGroupManager groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            List<ThreadGroup> rankGroups = pool.onRanks(rank -> groups.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<KernelContext> contexts = pool.onRanks(rank -> KernelContext.of(Device.cpu(rank), groups, "bench/redistribute"));
            for (Case c : cases) {
                Sharding source = Sharding.of(mesh, c.from());
                Sharding target = Sharding.of(mesh, c.to());
                ShardLayout layout = ShardLayout.of(shape, source);
                List<Tensor> bareLocals = pool.onRanks(rank -> torch.ones(layout.localShape(rank)));
                List<Tensor> plannedLocals = pool.onRanks(rank -> torch.ones(layout.localShape(rank)));
                Comparison row = new Comparison(c.name(), Goal.ratioAtLeast(0.95));
                try {
                    for (int run = 0; run < options.runs(); run++) {
                        Samples bare = new Samples("bare `" + c.collective() + "`");
                        Samples planned = new Samples("ConvertKernel");
                        for (int round = -1; round < options.rounds(); round++) { // round -1 warms up
                            for (int i = 0; i < PER_ROUND; i++) {
                                long t = pool.time(rank -> c.bare().apply(new Args(rankGroups.get(rank), bareLocals.get(rank), shape[0])).close());
                                if (round >= 0) {
                                    bare.add(t);
                                }
                            }
                            for (int i = 0; i < PER_ROUND; i++) {
                                long t = pool.time(rank -> ConvertKernel.of(source, target, shape).run(contexts.get(rank), plannedLocals.get(rank)).close());
                                if (round >= 0) {
                                    planned.add(t);
                                }
                            }
                        }
                        row.add(planned, bare);
                    }
                    requireOnes(c.name() + ", bare", bareLocals);
                    requireOnes(c.name() + ", ConvertKernel", plannedLocals);
                } finally {
                    bareLocals.forEach(Tensor::close);
                    plannedLocals.forEach(Tensor::close);
                }
                rows.add(row);
            }
        }
        report.comparisons(rows);
        Figure planning = new Figure("`ConvertKernel.of` with a cached plan, S(0) -> S(1) on this mesh, mean per call over "
            + Unit.count(options.iterations(PLANNING_CALLS)) + " calls", Unit.NANOS, Goal.context("planning and bookkeeping alone"));
        for (int run = 0; run < options.runs(); run++) {
            planning.add(planningNanos(Sharding.of(mesh, Placement.shard(0)), Sharding.of(mesh, Placement.shard(1)), shape,
                options.iterations(PLANNING_CALLS)));
        }
        report.figures(List.of(planning));
    }

    /** The mean cost of building a kernel from a cached plan, without running it. */
    private static double planningNanos(Sharding source, Sharding target, long[] shape, int iterations) {
        ConvertKernel.of(source, target, shape);
        long start = System.nanoTime();
        for (int i = 0; i < iterations; i++) {
            if (ConvertKernel.of(source, target, shape).plan().isIdentity()) {
                throw new IllegalStateException("unexpected identity plan");
            }
        }
        return (System.nanoTime() - start) / (double) iterations;
    }

    private static void requireOnes(String variant, List<Tensor> locals) {
        for (int rank = 0; rank < locals.size(); rank++) {
            try (Tensor min = locals.get(rank).min(); Tensor max = locals.get(rank).max()) {
                if (min.item_float() != 1f || max.item_float() != 1f) {
                    throw new IllegalStateException("redistribution benchmark: the local shard of '" + variant + "' on rank " + rank
                        + " changed (" + min.item_float() + " to " + max.item_float() + "); a variant mutated its input");
                }
            }
        }
    }
}
