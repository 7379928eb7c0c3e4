package org.dtorch.benchmarks;

import java.time.Duration;
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
 * plan reduces to. Variants are interleaved in rounds.
 */
final class RedistributionBenchmark {
    private static final int WORLD = 4;
    private static final long[] SHAPE = {4096, 4096}; // 64 MiB of float32
    private static final int ROUNDS = Integer.getInteger("bench.rounds", 6);
    private static final int PER_ROUND = 3;

    private RedistributionBenchmark() {
    }

    private record Case(String name, Placement from, Placement to, Function<Args, Tensor> bare) {
    }

    private record Args(ThreadGroup group, Tensor local) {
    }

    static void run(Report report) throws Exception {
        report.section("Redistribution, 4-device CPU mesh (Gloo), 64 MiB float32",
            "Rank 0's time per redistribution: `ConvertKernel.of(...)` (plan from the cache) and `run`, against the bare "
                + "`ThreadGroup` collective it reduces to.");
        DeviceMesh mesh = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
        List<Long> ids = mesh.deviceIds();
        List<Case> cases = List.of(
            new Case("S(0) -> R", Placement.shard(0), Placement.replicate(), a -> a.group().allGather(a.local(), 0, SHAPE[0])),
            new Case("P -> R", Placement.partial(), Placement.replicate(), a -> a.group().allReduce(a.local(), ReduceOpType.SUM)),
            new Case("S(0) -> S(1)", Placement.shard(0), Placement.shard(1), a -> a.group().allToAll(a.local(), 0, 1, SHAPE[0])),
            new Case("P -> S(0)", Placement.partial(), Placement.shard(0), a -> a.group().reduceScatterTensor(a.local(), ReduceOpType.SUM)));
        try (RankPool pool = new RankPool(WORLD);
             ThreadGroupManager groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            List<ThreadGroup> rankGroups = pool.onRanks(rank -> groups.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<KernelContext> contexts = pool.onRanks(rank -> KernelContext.of(Device.cpu(rank), groups, "bench/redistribute"));
            for (Case c : cases) {
                Sharding source = Sharding.of(mesh, c.from());
                Sharding target = Sharding.of(mesh, c.to());
                ShardLayout layout = ShardLayout.of(SHAPE, source);
                List<Tensor> locals = pool.onRanks(rank -> torch.ones(layout.localShape(rank)));
                Samples bare = new Samples("bare ThreadGroup collective", ROUNDS * PER_ROUND);
                Samples planned = new Samples("ConvertKernel", ROUNDS * PER_ROUND);
                for (int round = -1; round < ROUNDS; round++) { // round -1 warms up
                    for (int i = 0; i < PER_ROUND; i++) {
                        long t = pool.time(rank -> c.bare().apply(new Args(rankGroups.get(rank), locals.get(rank))).close());
                        if (round >= 0) {
                            bare.add(t);
                        }
                    }
                    for (int i = 0; i < PER_ROUND; i++) {
                        long t = pool.time(rank -> ConvertKernel.of(source, target, SHAPE).run(contexts.get(rank), locals.get(rank)).close());
                        if (round >= 0) {
                            planned.add(t);
                        }
                    }
                }
                report.row(c.name(), planned, bare, "ratio >= 0.95");
                locals.forEach(Tensor::close);
            }
        }
        report.note(String.format(java.util.Locale.ROOT,
            "Planning and bookkeeping alone (`ConvertKernel.of` with a cached plan, S(0) -> S(1) on this mesh): %.2f us per call.",
            planningMicros(Sharding.of(mesh, Placement.shard(0)), Sharding.of(mesh, Placement.shard(1)))));
    }

    /** The mean cost of building a kernel from a cached plan, without running it. */
    private static double planningMicros(Sharding source, Sharding target) {
        int iterations = 100_000;
        ConvertKernel.of(source, target, SHAPE);
        long start = System.nanoTime();
        for (int i = 0; i < iterations; i++) {
            if (ConvertKernel.of(source, target, SHAPE).plan().isIdentity()) {
                throw new IllegalStateException("unexpected identity plan");
            }
        }
        return (System.nanoTime() - start) / 1e3 / iterations;
    }
}
