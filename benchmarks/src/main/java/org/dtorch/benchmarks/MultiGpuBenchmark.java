package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;

/**
 * NCCL collectives through {@link ThreadGroup} across the machine's GPUs against {@code torch.distributed} with NCCL,
 * measured in the same call. World size W: the largest power of two up to min(visible GPUs, {@value #MAX_WORLD}),
 * so that every size splits evenly on both sides (the machine kinds have 2, 4 or 8); one rank per GPU, each a
 * thread of this JVM that made its GPU current ({@link ThreadGroupManager} with distinct devices, so c10d NCCL);
 * PyTorch's side is {@code benchmarks/python/bench_nccl_torch.py}, one process per GPU. Float32 all-reduce (SUM),
 * all-gather and reduce-scatter at 1 MiB, 16 MiB, 256 MiB and 1 GiB, all-to-all at 64 MiB, as bus bandwidth (nccl-tests'
 * convention: all-reduce size / time * 2(W-1)/W, the others size / time * (W-1)/W, size being the largest tensor of
 * the call); all-reduce both as {@code allReduce} (a new result, what the runtime's P to R uses) and as
 * {@code allReduceSum_} (in place, as torch's {@code all_reduce}); and the per-operator cost of a tiny {@code add} on a W-GPU mesh against a 1-GPU mesh.
 *
 * <p>Timing: each figure is the best of {@value #REPEATS} repeats of a few calls after warm-ups. Here a repeat is rank
 * 0's host time from a common start barrier to the end of its stream's synchronize after the calls; PyTorch's is the
 * time between CUDA events around the calls after a barrier, which leaves out the first launch (a few microseconds:
 * it matters at 1 MiB only).
 *
 * <p>With fewer than two GPUs the harness reports itself skipped. NCCL reads its settings from the environment of
 * this JVM, which the harness cannot change: it refuses to run unless {@link GpuBenchmark#MULTICAST_OFF} is set here
 * (tools/gpu-session.sh sets it), and sets it for the Python processes it starts.
 *
 * <p>Not thread-safe: one harness thread.
 */
final class MultiGpuBenchmark {
    private static final String TITLE = "Multi-GPU: NCCL collectives through ThreadGroup against torch.distributed";
    private static final int MAX_WORLD = 8;
    private static final int REPEATS = 3;
    private static final int WARM_UPS = 5;
    /** Small all-reduces that warm the collective's host side (the JIT) before the timed rounds, too few to warm it. */
    private static final int SMALL_WARM_UPS = 200;
    private static final List<Long> SIZES = List.of(1L << 20, 16L << 20, 256L << 20, 1L << 30);
    private static final List<Long> QUICK_SIZES = List.of(1L << 20, 16L << 20);
    private static final long ALL_TO_ALL_BYTES = 64L << 20;
    private static final long QUICK_ALL_TO_ALL_BYTES = 16L << 20;
    private static final double GOAL = 0.95;

    private MultiGpuBenchmark() {
    }

    /** A collective as both sides name it, and its bus-bandwidth factor at world size {@code w}. */
    private enum Op {
        ALL_REDUCE("allreduce", "all-reduce (SUM), `allReduce` (a new result)"),
        ALL_REDUCE_IN_PLACE("allreduce", "all-reduce (SUM), `allReduceSum_` (in place, as torch's)"),
        ALL_GATHER("allgather", "all-gather"),
        REDUCE_SCATTER("reducescatter", "reduce-scatter (SUM)"),
        ALL_TO_ALL("alltoall", "all-to-all");

        final String key;
        final String title;

        Op(String key, String title) {
            this.key = key;
            this.title = title;
        }

        double busFactor(int w) {
            return (this == ALL_REDUCE || this == ALL_REDUCE_IN_PLACE ? 2.0 : 1.0) * (w - 1) / w;
        }
    }

    static void run(Report report, BenchOptions options) throws Exception {
        int visible = Cuda.deviceCount();
        if (visible < 2) {
            String reason = "needs at least 2 GPUs (" + visible + " visible)";
            report.section(TITLE, "multigpu", "Skipped: " + reason + ".");
            System.err.println("benchmark multigpu skipped: " + reason);
            return;
        }
        requireMulticastOff();
        int world = Integer.highestOneBit(Math.min(visible, MAX_WORLD));
        List<Long> sizes = options.quick() ? QUICK_SIZES : SIZES;
        long allToAllBytes = options.quick() ? QUICK_ALL_TO_ALL_BYTES : ALL_TO_ALL_BYTES;
        List<String> keys = new ArrayList<>();
        for (long size : sizes) {
            for (Op op : List.of(Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER)) {
                keys.add(key(op, size)); // ALL_REDUCE_IN_PLACE shares ALL_REDUCE's key
            }
        }
        keys.add(key(Op.ALL_TO_ALL, allToAllBytes));
        GpuBenchmark.PyTorchSide side = GpuBenchmark.pytorch(options.root(), "bench_nccl_torch.py", List.of("--world", String.valueOf(world),
            "--sizes", String.join(",", sizes.stream().map(MultiGpuBenchmark::sizeName).toList()), "--alltoall", sizeName(allToAllBytes),
            "--repeats", String.valueOf(REPEATS)), keys);
        Map<String, Double> py = side.figures();

        List<GpuBenchmark.Row> rows = new ArrayList<>();
        try (RankPool pool = new RankPool(world);
             ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            List<Long> ids = new ArrayList<>();
            for (long id = 0; id < world; id++) {
                ids.add(id);
            }
            List<ThreadGroup> groups = pool.onRanks(rank -> {
                Cuda.setCurrentDevice(Device.cuda(rank));
                return manager.getThreadGroup(DeviceKind.CUDA, ids, rank);
            });
            warmUp(pool, groups);
            for (long size : sizes) {
                for (Op op : List.of(Op.ALL_REDUCE, Op.ALL_REDUCE_IN_PLACE, Op.ALL_GATHER, Op.REDUCE_SCATTER)) {
                    boolean goal = (op == Op.ALL_REDUCE || op == Op.ALL_REDUCE_IN_PLACE) && size == 1L << 30;
                    rows.add(row(op, size, world, busGbps(pool, groups, op, size), py.get(key(op, size)), goal));
                }
            }
            rows.add(row(Op.ALL_TO_ALL, allToAllBytes, world, busGbps(pool, groups, Op.ALL_TO_ALL, allToAllBytes),
                py.get(key(Op.ALL_TO_ALL, allToAllBytes)), false));
        }

        int adds = options.quick() ? 2_000 : 20_000;
        double oneGpuUs = GpuBenchmark.addThroughRuntime(adds, 1) / 1e3;
        double meshUs = GpuBenchmark.addThroughRuntime(adds, world) / 1e3;
        rows.add(new GpuBenchmark.Row("`add` on (1,), replicated, us per operator (enqueue, then one sync)", GpuBenchmark.f(meshUs)
            + " (runtime, " + world + "-GPU mesh)", "the runtime on a 1-GPU mesh " + GpuBenchmark.f(oneGpuUs),
            GpuBenchmark.f(meshUs / oneGpuUs) + "x the 1-GPU mesh's time", "(measured)"));

        report.sectionRunOnce(TITLE, "tools/gpu-session.sh multigpu",
            world + " x " + side.device() + " (" + visible + " visible), against PyTorch " + side.version() + " in the same call "
                + "(`benchmarks/python/bench_nccl_torch.py`, one process per GPU, CUDA events); float32, bus bandwidth in GB/s, "
                + "each figure the best of " + REPEATS + " repeats on both sides; ours is rank 0's host time to its stream's "
                + "synchronize (events leave out the first call's launch, a few us: it matters at 1 MiB only). NVLink multicast off on "
                + "both sides (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, "
                + "NVSHMEM_DISABLE_NVLS=1).");
        report.note(GpuBenchmark.table(rows));
    }

    private static void requireMulticastOff() {
        for (Map.Entry<String, String> e : GpuBenchmark.MULTICAST_OFF.entrySet()) {
            if (!e.getValue().equals(System.getenv(e.getKey()))) {
                throw new IllegalStateException("NVLink multicast must be off in this JVM before NCCL starts: " + e.getKey() + " is "
                    + System.getenv(e.getKey()) + ", expected " + e.getValue() + " (set " + GpuBenchmark.MULTICAST_OFF
                    + ", as tools/gpu-session.sh does)");
            }
        }
    }

    private static GpuBenchmark.Row row(Op op, long size, int world, double ours, double torchGbps, boolean goal) {
        double ratio = ours / torchGbps;
        return new GpuBenchmark.Row(op.title + ", " + Unit.size(size) + ", " + world + " GPUs, bus GB/s", GpuBenchmark.f(ours),
            "torch.distributed " + GpuBenchmark.f(torchGbps), GpuBenchmark.f(ratio) + " of torch",
            goal ? GpuBenchmark.verdict(">= " + GOAL + "x of torch.distributed", ratio >= GOAL) : "(measured)");
    }

    /** {@value #SMALL_WARM_UPS} all-reduces of a few floats per rank, so the host side is compiled before timing. */
    private static void warmUp(RankPool pool, List<ThreadGroup> groups) throws Exception {
        for (int i = 0; i < SMALL_WARM_UPS; i++) {
            timeCalls(pool, groups, Op.ALL_REDUCE, 64, 1);
        }
    }

    /** Bus bandwidth in GB/s of {@code op} at {@code bytes}: warm-ups, then the best of {@value #REPEATS} repeats. */
    private static double busGbps(RankPool pool, List<ThreadGroup> groups, Op op, long bytes) throws Exception {
        int calls = bytes <= 16L << 20 ? 50 : bytes <= 256L << 20 ? 10 : 5;
        timeCalls(pool, groups, op, bytes, WARM_UPS);
        long best = Long.MAX_VALUE;
        for (int i = 0; i < REPEATS; i++) {
            best = Math.min(best, timeCalls(pool, groups, op, bytes, calls));
        }
        double seconds = best / 1e9 / calls;
        return bytes / seconds * op.busFactor(groups.size()) / 1e9;
    }

    /**
     * Rank 0's nanoseconds for {@code calls} of {@code op} at {@code bytes} (float32, one dimension; all-to-all two),
     * results closed, then its stream synchronized. Inputs are made before the common start and closed after.
     */
    private static long timeCalls(RankPool pool, List<ThreadGroup> groups, Op op, long bytes, int calls) throws Exception {
        int world = groups.size();
        long elements = bytes / Float.BYTES;
        Tensor[] inputs = new Tensor[world];
        RankPool.RankBody setup = rank -> {
            Device gpu = Device.cuda(rank);
            Cuda.setCurrentDevice(gpu);
            long[] shape = switch (op) {
                case ALL_REDUCE, ALL_REDUCE_IN_PLACE, REDUCE_SCATTER -> new long[] {elements};
                case ALL_GATHER -> new long[] {elements / world};
                // rank's shard on dim 1 of (world * 1024, elements / 1024): sent as contiguous row blocks (S(1) -> S(0))
                case ALL_TO_ALL -> new long[] {world * 1024L, elements / (world * 1024L)};
            };
            try (TensorOptions options = TorchTensors.options(ScalarType.Float, gpu)) {
                inputs[rank] = torch.ones(shape, options);
            }
        };
        RankPool.RankBody body = rank -> {
            for (int i = 0; i < calls; i++) {
                call(groups.get(rank), op, inputs[rank], elements);
            }
            DeviceStream.of(Device.cuda(rank)).synchronize();
        };
        try {
            return pool.time(setup, body);
        } finally {
            for (Tensor t : inputs) {
                if (t != null) {
                    t.close();
                }
            }
        }
    }

    /**
     * One call of {@code op} on {@code input}; a result is closed at once, so the caching allocator hands its block to
     * the next call, as in torch's loop, which writes into the same output each time.
     */
    private static void call(ThreadGroup group, Op op, Tensor input, long elements) {
        switch (op) {
            case ALL_REDUCE -> group.allReduce(input, ReduceOpType.SUM).close();
            // the values grow each call (to inf): NCCL's time does not depend on them
            case ALL_REDUCE_IN_PLACE -> group.allReduceSum_(input);
            case ALL_GATHER -> group.allGatherIntoTensor(input, elements).close();
            case REDUCE_SCATTER -> group.reduceScatterTensor(input, ReduceOpType.SUM).close();
            case ALL_TO_ALL -> group.allToAll(input, 1, 0, input.size(1) * group.getWorldSize()).close();
        }
    }

    private static String key(Op op, long bytes) {
        return op.key + "_" + sizeName(bytes) + "_busbw";
    }

    /** 1m, 64m, 1g: the Python side's size names. */
    private static String sizeName(long bytes) {
        return bytes >= 1L << 30 ? (bytes >> 30) + "g" : (bytes >> 20) + "m";
    }
}
