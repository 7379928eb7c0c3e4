package org.dtorch.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The runtime on one CUDA device against the machine's own PyTorch, measured in the same call: bf16 matmul
 * throughput through the runtime, per-operator cost of a tiny {@code add}, the same-device all-reduce of four
 * ranks on one GPU, pinned host-device copies, and the CUDA IPC hand-off of a 64 MiB tensor between two JVMs
 * through a File store against {@code torch.multiprocessing} between two Python processes. PyTorch's figures come from
 * {@code benchmarks/python/bench_gpu_torch.py}, run by {@code python3} from the same working tree; each throughput
 * figure on both sides is the best of a few repeats (GPU timings are steady; the best is the least disturbed), and the
 * hand-off's p50 and p99 come from one run of a few hundred iterations on each side.
 *
 * <p>Not thread-safe: one harness thread.
 */
final class GpuBenchmark {
    private static final Device GPU = Device.cuda(0);
    private static final int RANKS = 4;
    /** Small all-reduces that warm the collective's host side before its timed rounds. */
    private static final int ALL_REDUCE_WARM_UPS = 500;
    private static final int REPEATS = 3;
    private static final long PYTHON_TIMEOUT_SECONDS = 600;
    /** The tensor the IPC hand-off lends, as its goal names it; the same in quick mode. */
    static final long IPC_BYTES = 64L * 1024 * 1024;
    private static final double IPC_GOAL = 0.5;
    /**
     * The environment that keeps NVLink multicast off in NCCL, torch's symmetric memory and NVSHMEM: a program that uses
     * it can take a multi-GPU host's GPUs out of service.
     */
    static final Map<String, String> MULTICAST_OFF = Map.of("NCCL_NVLS_ENABLE", "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "1",
        "NVSHMEM_DISABLE_NVLS", "1");

    private GpuBenchmark() {
    }

    /** One row: our figure, the baselines it is compared with, and the goal. */
    record Row(String measure, String ours, String baselines, String ratio, String goal) {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        Cuda.require(GPU);
        boolean quick = options.quick();
        PyTorchSide side = pytorch(options.root(), quick ? List.of("--quick") : List.of(), List.of("matmul_bf16_tflops",
            "add_us", "stack_sum_gbps", "h2d_gbps", "d2h_gbps", "ipc_p50_us", "ipc_p99_us", "ipc_copy_p50_us", "ipc_write_p50_us",
            "ipc_write_p99_us"));
        Map<String, Double> py = side.figures();
        List<Row> rows = new ArrayList<>();

        long n = quick ? 2048 : 8192;
        int matmuls = quick ? 5 : 20;
        double flop = 2.0 * n * n * n;
        double runtimeTflops = flop / perIteration(matmulThroughRuntime(n, matmuls)) / 1e12;
        double directTflops = flop / perIteration(matmulDirect(n, matmuls)) / 1e12;
        double ratio = runtimeTflops / py.get("matmul_bf16_tflops");
        rows.add(new Row("bf16 matmul " + n + "^3, TFLOP/s", f(runtimeTflops) + " (runtime, one worker)",
            "PyTorch " + f(py.get("matmul_bf16_tflops")) + "; direct Java libtorch " + f(directTflops),
            f(ratio) + " of PyTorch", verdict(">= 0.97x of PyTorch", ratio >= 0.97)));

        int adds = quick ? 2_000 : 20_000;
        double runtimeAddUs = addThroughRuntime(adds, 1) / 1e3;
        double directAddUs = addDirect(adds) / 1e3;
        double addRatio = runtimeAddUs / py.get("add_us");
        rows.add(new Row("`add` on (1,), us per operator (enqueue, then one sync)", f(runtimeAddUs) + " (runtime)",
            "PyTorch eager " + f(py.get("add_us")) + "; direct Java libtorch " + f(directAddUs),
            f(addRatio) + "x PyTorch's time", verdict("<= 1.2x of PyTorch eager", addRatio <= 1.2)));

        long elements = (quick ? 16L : 256L) * 1024 * 1024 / Float.BYTES;
        double allBytes = (double) RANKS * elements * Float.BYTES;
        double allReduceGbps = allBytes / sameDeviceAllReduceNanos(elements);
        double copyGbps = allBytes / deviceCopyNanos((long) allBytes);
        double copyRatio = allReduceGbps / copyGbps;
        rows.add(new Row("same-device all-reduce, " + RANKS + " ranks x " + Unit.size(elements * Float.BYTES) + " float32 on one GPU, GB/s of inputs",
            f(allReduceGbps), "device-to-device copy of the same bytes " + f(copyGbps) + "; PyTorch `torch.stack(xs).sum(0)` "
                + f(py.get("stack_sum_gbps")),
            f(copyRatio) + " of the copy", verdict(">= 0.8x of the copy", copyRatio >= 0.8)));

        long bytes = (quick ? 64L : 1024L) * 1024 * 1024;
        double[] copies = hostDeviceGbps(bytes);
        double h2dRatio = copies[0] / py.get("h2d_gbps");
        double d2hRatio = copies[1] / py.get("d2h_gbps");
        rows.add(new Row("host to device, " + Unit.size(bytes) + " pinned, GB/s", f(copies[0]), "PyTorch " + f(py.get("h2d_gbps")),
            f(h2dRatio) + " of PyTorch", verdict(">= 0.95x", h2dRatio >= 0.95)));
        rows.add(new Row("device to host, " + Unit.size(bytes) + " pinned, GB/s", f(copies[1]), "PyTorch " + f(py.get("d2h_gbps")),
            f(d2hRatio) + " of PyTorch", verdict(">= 0.95x", d2hRatio >= 0.95)));

        int ipcWarmup = quick ? 100 : 500;
        int ipcIterations = quick ? 200 : 1000;
        Handoff handoff = cudaIpcHandoff(ipcWarmup, ipcIterations, false);
        Samples ipc = handoff.samples();
        double ipcP50 = ipc.p50() / 1e3;
        double ipcP99 = ipc.p99() / 1e3;
        double ipcRatio = ipcP50 / py.get("ipc_p50_us");
        rows.add(new Row("CUDA IPC hand-off of " + Unit.size(IPC_BYTES) + " between two processes, us p50 / p99 (" + ipcIterations
                + " after " + ipcWarmup + " warm-up; consumer copies it out, syncs, finishes)",
            f(ipcP50) + " / " + f(ipcP99) + " (File store, two JVMs; p50 of the steps, us: " + handoff.steps() + ")",
            "`torch.multiprocessing` (spawn, Queue, ack Queue) " + f(py.get("ipc_p50_us")) + " / " + f(py.get("ipc_p99_us"))
                + " (its consumer's copy+sync " + f(py.get("ipc_copy_p50_us")) + ")"
                + "; floor: one device copy of the bytes " + f(deviceCopyNanos(IPC_BYTES) / 1e3),
            f(ipcRatio) + "x PyTorch's p50", verdict("<= " + IPC_GOAL + "x of PyTorch's p50", ipcRatio <= IPC_GOAL)));
        Samples written = cudaIpcHandoff(ipcWarmup, ipcIterations, true).samples();
        double writtenRatio = written.p50() / 1e3 / py.get("ipc_write_p50_us");
        rows.add(new Row("the same, the producer rewriting the tensor before each hand-off (an elementwise kernel on its stream, "
                + "so the consumer's copy waits for it), us p50 / p99",
            f(written.p50() / 1e3) + " / " + f(written.p99() / 1e3) + " (File store, two JVMs)",
            "`torch.multiprocessing`, the same rewrite " + f(py.get("ipc_write_p50_us")) + " / " + f(py.get("ipc_write_p99_us"))
                + " (its consumer, finding the storage in its cache, does not wait for the producer's event: its copy is not "
                + "ordered after the rewrite)",
            f(writtenRatio) + "x PyTorch's p50", "(measured: the goal is the steady state above)"));

        report.sectionRunOnce("GPU: the runtime on one CUDA device against the machine's PyTorch", "tools/gpu-session.sh bench",
            side.device() + " (cuda:0), against PyTorch " + side.version() + " in the same call (`benchmarks/python/bench_gpu_torch.py`); "
                + "each figure is the best of " + REPEATS + " repeats on both sides, except the IPC hand-off's percentiles, which come from one "
                + "run of each side. The Java side runs from the `-Pgpu` class path "
                + "staged with `gpu-stage` (docs/gpu.md).");
        report.note(table(rows));
    }

    /** The rows as a Markdown table. */
    static String table(List<Row> rows) {
        StringBuilder table = new StringBuilder("| measure | DTorch for the JVM | baselines | ratio | goal |\n|---|---|---|---|---|");
        for (Row row : rows) {
            table.append("\n| ").append(row.measure()).append(" | ").append(row.ours()).append(" | ").append(row.baselines()).append(" | ")
                .append(row.ratio()).append(" | ").append(row.goal()).append(" |");
        }
        return table.toString();
    }

    // ---- the Java side ---------------------------------------------------------------------------------

    /** The best of {@link #REPEATS} timings, each the nanoseconds per iteration. */
    private static double perIteration(double[] nanosPerIteration) {
        double best = Double.MAX_VALUE;
        for (double v : nanosPerIteration) {
            best = Math.min(best, v);
        }
        return best / 1e9;
    }

    private static double[] repeat(int times, LongSupplier nanos) {
        double[] out = new double[times];
        for (int i = 0; i < times; i++) {
            out[i] = nanos.getAsLong();
        }
        return out;
    }

    /** Nanoseconds per bf16 matmul through a one-device CUDA runtime, results closed, then {@code sync()}. */
    private static double[] matmulThroughRuntime(long n, int iterations) {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:1").timeout(Duration.ofSeconds(300)).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            try (DTensor a = dt.ones(new long[] {n, n}, ScalarType.BFloat16, mesh); DTensor b = dt.ones(new long[] {n, n}, ScalarType.BFloat16, mesh)) {
                for (int i = 0; i < 3; i++) {
                    a.matmul(b).close();
                }
                dt.sync();
                return repeat(REPEATS, () -> {
                    long start = System.nanoTime();
                    for (int i = 0; i < iterations; i++) {
                        a.matmul(b).close();
                    }
                    dt.sync();
                    return (System.nanoTime() - start) / iterations;
                });
            }
        }
    }

    /** The same matmul on Java libtorch directly, on the calling thread's current stream. */
    private static double[] matmulDirect(long n, int iterations) {
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.BFloat16, GPU);
             Tensor a = torch.ones(new long[] {n, n}, options); Tensor b = torch.ones(new long[] {n, n}, options)) {
            for (int i = 0; i < 3; i++) {
                a.matmul(b).close();
            }
            stream.synchronize();
            return repeat(REPEATS, () -> {
                long start = System.nanoTime();
                for (int i = 0; i < iterations; i++) {
                    a.matmul(b).close();
                }
                stream.synchronize();
                return (System.nanoTime() - start) / iterations;
            });
        }
    }

    /**
     * Nanoseconds per {@code add} on (1,) through a CUDA runtime of {@code gpus} devices, one per GPU (the default mesh,
     * replicated operands); best of the repeats.
     */
    static double addThroughRuntime(int ops, int gpus) {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:" + gpus).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            try (DTensor a = dt.ones(new long[] {1}, mesh); DTensor b = dt.ones(new long[] {1}, mesh)) {
                LongSupplier round = () -> {
                    long start = System.nanoTime();
                    for (int i = 0; i < ops; i++) {
                        a.add(b).close();
                    }
                    dt.sync();
                    return (System.nanoTime() - start) / ops;
                };
                round.getAsLong();
                round.getAsLong();
                return min(repeat(5, round));
            }
        }
    }

    /** Nanoseconds per {@code add} on (1,) on Java libtorch directly (result closed), then one synchronize. */
    private static double addDirect(int ops) {
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor x = torch.ones(new long[] {1}, options); Tensor y = torch.ones(new long[] {1}, options)) {
            LongSupplier round = () -> {
                long start = System.nanoTime();
                for (int i = 0; i < ops; i++) {
                    x.add(y).close();
                }
                stream.synchronize();
                return (System.nanoTime() - start) / ops;
            };
            round.getAsLong();
            round.getAsLong();
            return min(repeat(5, round));
        }
    }

    /** Nanoseconds per same-device all-reduce (SUM) of {@link #RANKS} ranks in threads on one GPU, each rank then synchronizing. */
    private static double sameDeviceAllReduceNanos(long elements) throws Exception {
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        try (RankPool pool = new RankPool(RANKS);
             ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            List<ThreadGroup> groups = pool.onRanks(rank -> manager.getThreadGroup(DeviceKind.CUDA, ids, rank));
            List<Tensor> inputs = pool.onRanks(rank -> {
                try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU)) {
                    return torch.full(new long[] {elements}, new Scalar(rank + 1.0), options);
                }
            });
            RankPool.RankBody once = rank -> {
                try (Tensor sum = groups.get(rank).allReduce(inputs.get(rank), ReduceOpType.SUM)) {
                    DeviceStream.of(GPU).synchronize();
                }
            };
            RankPool.RankBody checked = rank -> {
                try (Tensor sum = groups.get(rank).allReduce(inputs.get(rank), ReduceOpType.SUM)) {
                    double expected = RANKS * (RANKS + 1) / 2.0;
                    try (Tensor first = sum.narrow(0, 0, 1); Tensor last = sum.narrow(0, elements - 1, 1)) {
                        if (first.item_double() != expected || last.item_double() != expected) {
                            throw new IllegalStateException("same-device all-reduce gave " + first.item_double() + ", expected " + expected);
                        }
                    }
                }
            };
            pool.time(checked); // checked once, outside the timed rounds: reading values back is not part of the collective
            warmUpSmallAllReduces(pool, groups);
            pool.time(once);
            double best = Double.MAX_VALUE;
            for (int i = 0; i < 10; i++) {
                best = Math.min(best, pool.time(once));
            }
            inputs.forEach(Tensor::close);
            return best;
        }
    }

    /**
     * {@value #ALL_REDUCE_WARM_UPS} all-reduces of {@link #RANKS} floats per rank on the same groups: the host side
     * of the collective (store exchanges, the fused kernel's launch) runs the same code as at 256 MiB, so the JIT
     * compiles it before the timed rounds, which are too few to warm it themselves.
     */
    private static void warmUpSmallAllReduces(RankPool pool, List<ThreadGroup> groups) throws Exception {
        List<Tensor> small = pool.onRanks(rank -> {
            try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU)) {
                return torch.ones(new long[] {RANKS * 4L}, options);
            }
        });
        RankPool.RankBody once = rank -> {
            try (Tensor sum = groups.get(rank).allReduce(small.get(rank), ReduceOpType.SUM)) {
                DeviceStream.of(GPU).synchronize();
            }
        };
        for (int i = 0; i < ALL_REDUCE_WARM_UPS; i++) {
            pool.time(once);
        }
        small.forEach(Tensor::close);
    }

    /** Nanoseconds of one device-to-device copy of {@code bytes}; best of ten. */
    static double deviceCopyNanos(long bytes) {
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.Byte, GPU);
             Tensor src = torch.ones(new long[] {bytes}, options); Tensor dst = torch.empty(new long[] {bytes}, options, new MemoryFormatOptional())) {
            dst.copy_(src);
            stream.synchronize();
            return min(repeat(10, () -> {
                long start = System.nanoTime();
                dst.copy_(src);
                stream.synchronize();
                return System.nanoTime() - start;
            }));
        }
    }

    /** GB/s host to device and device to host of {@code bytes} of pinned host memory, non-blocking copies then synchronize. */
    private static double[] hostDeviceGbps(long bytes) {
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions hostOptions = TorchTensors.options(ScalarType.Byte, Device.cpu(0));
             TensorOptions gpuOptions = TorchTensors.options(ScalarType.Byte, GPU);
             Tensor pageable = torch.ones(new long[] {bytes}, hostOptions); Tensor host = pageable.pin_memory();
             Tensor device = torch.empty(new long[] {bytes}, gpuOptions, new MemoryFormatOptional())) {
            double[] gbps = new double[2];
            for (int direction = 0; direction < 2; direction++) {
                Tensor to = direction == 0 ? device : host;
                Tensor from = direction == 0 ? host : device;
                to.copy_(from, true);
                stream.synchronize();
                double best = min(repeat(5, () -> {
                    long start = System.nanoTime();
                    to.copy_(from, true);
                    stream.synchronize();
                    return System.nanoTime() - start;
                }));
                gbps[direction] = bytes / best;
            }
            return gbps;
        }
    }

    /**
     * Per-iteration latencies of the CUDA IPC hand-off, in the steady state: this JVM is rank 0 of a File store and
     * lends the same {@link #IPC_BYTES} float32 tensor on {@code cuda:0} each iteration ({@code srcSet}); a
     * {@link CudaIpcBenchPeer} JVM takes it ({@code destGet}, the allocation opened once and then cached), copies it
     * into a buffer of its own, synchronizes its stream and finishes; an iteration ends when this side's
     * {@code srcWaitUntilGetFinished} returns. With {@code write}, the producer first rewrites the tensor on its stream
     * ({@code add_(0)}), so the hand-off carries a dependency on running work. Checks afterwards that the peer copied
     * the right values and opened the allocation once.
     */
    private record Handoff(Samples samples, String steps) {
    }

    private static Handoff cudaIpcHandoff(int warmup, int iterations, boolean write) throws Exception {
        String instance = GlobalCommInstanceId.next();
        String key = "bench/cuda-ipc";
        long elements = IPC_BYTES / Float.BYTES;
        DeviceStream stream = DeviceStream.of(GPU);
        Samples samples = new Samples("CUDA IPC hand-off, 2 JVMs");
        String steps;
        try (PeerJvm peer = PeerJvm.start(CudaIpcBenchPeer.class, "CUDA IPC consumer",
                 List.of(instance, key, String.valueOf(warmup + iterations), String.valueOf(elements),
                     String.valueOf(Long.getLong("bench.ipc.settleMicros", 0))));
             TensorStore store = TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance)
                 .storeKey(key).worldSize(2).rank(0).timeout(Duration.ofSeconds(120)).build());
             TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor value = torch.ones(new long[] {elements}, options); Scalar zero = new Scalar(0.0)) {
            peer.awaitLine("READY");
            stream.synchronize();
            Samples set = new Samples("srcSet");
            for (int i = 0; i < warmup + iterations; i++) {
                long start = System.nanoTime();
                if (write) {
                    value.add_(zero); // on the current stream, the one srcSet names: its work is still running
                }
                store.srcSet("x", value, stream, 1);
                long published = System.nanoTime();
                store.srcWaitUntilGetFinished("x", stream);
                long took = System.nanoTime() - start;
                if (i >= warmup) {
                    samples.add(took);
                    set.add(published - start);
                }
            }
            String diagnosis = peer.valueOf("DIAG");
            steps = "producer's srcSet " + f(set.p50() / 1e3) + "; consumer's " + peer.valueOf("STEPS") + "; on the last take: " + diagnosis;
            double sum = Double.parseDouble(peer.valueOf("SUM"));
            long opened = Long.parseLong(peer.valueOf("OPENED"));
            store.barrier();
            if (sum != elements) {
                throw new IllegalStateException("the CUDA IPC consumer's copy sums to " + sum + ", expected " + elements);
            }
            if (opened != 1) {
                throw new IllegalStateException("the CUDA IPC consumer opened " + opened + " allocations; the steady state opens one");
            }
        }
        return new Handoff(samples, steps);
    }

    private static double min(double[] values) {
        double best = Double.MAX_VALUE;
        for (double v : values) {
            best = Math.min(best, v);
        }
        return best;
    }

    // ---- PyTorch's side ----------------------------------------------------------------------------------

    /** What the Python script printed: its figures, PyTorch's version and the device's name. */
    record PyTorchSide(Map<String, Double> figures, String version, String device) {
    }

    /**
     * Runs {@code benchmarks/python/bench_gpu_torch.py} with {@code args} and reads its JSON object, which must hold
     * the figures {@code keys}.
     */
    static PyTorchSide pytorch(Path root, List<String> args, List<String> keys) throws IOException, InterruptedException {
        return pytorch(root, "bench_gpu_torch.py", args, keys);
    }

    /**
     * Runs {@code benchmarks/python/<script>} with {@code args}, NVLink multicast off in its environment
     * ({@link #MULTICAST_OFF}: a program that uses it can take a multi-GPU host's GPUs out of service), and reads its
     * JSON object, which must hold the figures {@code keys}.
     */
    static PyTorchSide pytorch(Path root, String script, List<String> args, List<String> keys) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(System.getProperty("bench.python", "python3"),
            root.resolve("benchmarks/python").resolve(script).toString()));
        command.addAll(args);
        Path out = Files.createTempFile("bench-gpu-torch", ".json");
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(out.toFile()).redirectError(ProcessBuilder.Redirect.INHERIT);
        builder.environment().putAll(MULTICAST_OFF);
        Process process = builder.start();
        if (!process.waitFor(PYTHON_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " did not finish within " + PYTHON_TIMEOUT_SECONDS + " s");
        }
        String json = Files.readString(out, StandardCharsets.UTF_8).strip();
        Files.deleteIfExists(out);
        if (process.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " exited with " + process.exitValue() + ": " + json);
        }
        Map<String, Double> figures = new TreeMap<>();
        Matcher numbers = Pattern.compile("\"([a-z0-9_]+)\":\\s*(-?[0-9.eE+-]+)").matcher(json);
        while (numbers.find()) {
            figures.put(numbers.group(1), Double.parseDouble(numbers.group(2)));
        }
        for (String key : keys) {
            if (!figures.containsKey(key)) {
                throw new IllegalStateException("the PyTorch side printed no " + key + ": " + json);
            }
        }
        return new PyTorchSide(figures, text(json, "torch"), text(json, "device"));
    }

    private static String text(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":\\s*\"([^\"]+)\"").matcher(json);
        return m.find() ? m.group(1) : "(unknown)";
    }

    static String f(double value) {
        return String.format(Locale.ROOT, value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.2f", value);
    }

    static String verdict(String goal, boolean met) {
        return goal + ": " + (met ? "**met**" : "**not met**");
    }
}
