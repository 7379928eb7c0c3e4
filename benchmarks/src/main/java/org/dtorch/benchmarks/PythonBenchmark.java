package org.dtorch.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;

/**
 * The Python facade's costs, through {@code ./dtorch run} ({@code benchmarks/python/bench_python.py}), each
 * run once with GraalPy's JIT and once in its interpreter: issuing one operator from Python, against the
 * Java client issuing the same operator (measured in this JVM in the same run, between the Python
 * processes); one {@code torch.add} of the {@code torch} module against the same call from Java through Bytedeco;
 * and {@code await}'s wake-up, against asyncio's own floor measured in the same Python process
 * (another Python thread's {@code call_soon_threadsafe} to the coroutine running again).
 *
 * <p>Needs the launcher built ({@code ./dtorch build}), so that it measures the checked-out code.
 */
final class PythonBenchmark {
    private static final int ROUNDS = 20;
    private static final int WARMUP_ROUNDS = 30; // the JIT needs several hundred thousand calls to compile the Python -> Java path
    private static final int OPS = 20_000;
    private static final int AWAITS = 1_000;
    private static final int WARMUP_AWAITS = 3_000;
    private static final int JAVA_WARMUP_ROUNDS = 2;
    /** torch.add: batches of 10 calls timed together; the JIT compiles the path within the first few hundred thousand calls. */
    private static final int TORCH_BATCHES = 20_000;
    private static final int TORCH_WARMUP_BATCHES = 60_000;
    private static final int TORCH_BATCH = 10;
    /** How long one Python process may run. */
    private static final long PROCESS_TIMEOUT_SECONDS = 600;

    private PythonBenchmark() {
    }

    /** The settings of one Python run. */
    private record Mode(String label, String jit) {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        Path root = options.root();
        Path launcher = root.resolve("dtorch");
        Path script = root.resolve("benchmarks/python/bench_python.py");
        if (!Files.isExecutable(launcher) || !Files.isRegularFile(script)
            || !Files.isRegularFile(root.resolve("python-facade/target/launcher.classpath"))) {
            throw new IllegalStateException("python benchmark: needs " + launcher + ", " + script + " and a built launcher "
                + "(python-facade/target/launcher.classpath); run ./dtorch build in " + root + " first");
        }
        int ops = options.iterations(OPS);
        int rounds = options.quick() ? 3 : ROUNDS;
        int warmup = options.quick() ? 2 : WARMUP_ROUNDS;
        int awaits = options.iterations(AWAITS);
        int warmupAwaits = options.iterations(WARMUP_AWAITS);
        int torchBatches = options.iterations(TORCH_BATCHES);
        int torchWarmup = options.iterations(TORCH_WARMUP_BATCHES);
        report.section("Python facade", "python",
            "`benchmarks/python/bench_python.py` through `./dtorch run --devices cpu:1`, per run once with GraalPy's JIT and once "
                + "with `DTORCH_JIT=off` (the interpreter), each in a fresh JVM. Enqueue: mean per operator (`y = x + x; y.close()`) "
                + "over rounds of " + Unit.count(ops) + ", " + rounds + " rounds after " + warmup + " warm-up rounds; baseline: the Java client "
                + "issuing the same `add` in rounds of " + Unit.count(ops) + ", measured in the benchmark JVM in the same run. `await`: "
                + "value set in the JVM to the coroutine running again, " + Unit.count(awaits) + " awaits after " + Unit.count(warmupAwaits) + " of "
                + "warm-up; baseline: another Python thread's `call_soon_threadsafe` to the coroutine running again, in the same "
                + "process (asyncio's own share). DTorch itself polls every 500 us (0.5 ms) for `await`, a figure from its "
                + "documentation, not measured here. `torch.add`: one call of the `torch` module's `torch.add(a, b)` on two (1,) "
                + "CPU tensors (argument kinds, the cached overload, the ATen dispatcher's boxed call, the result's handle), the "
                + "mean of each batch of " + TORCH_BATCH + " calls timed together, " + Unit.count(torchBatches) + " batches after "
                + Unit.count(torchWarmup) + " of warm-up; baseline: the same `torch.add` from Java through Bytedeco's binding "
                + "(`torch.add(a, b)`, result closed), timed the same way in the benchmark JVM in the same run.");
        List<Mode> modes = List.of(new Mode("JIT", "on"), new Mode("interpreter", "off"));
        Map<String, Comparison> enqueue = new HashMap<>();
        Map<String, Comparison> wakeup = new HashMap<>();
        Map<String, Comparison> torchAdd = new HashMap<>();
        for (Mode mode : modes) {
            boolean jit = mode.jit().equals("on");
            enqueue.put(mode.label(), new Comparison("enqueue one operator from Python, " + mode.label(),
                jit ? Goal.p50AtMost(5_000) : Goal.context("context")));
            wakeup.put(mode.label(), new Comparison("`await` wake-up, " + mode.label(),
                jit ? Goal.p50AtMost(100_000) : Goal.context("context")));
            torchAdd.put(mode.label(), new Comparison("`torch.add` of two (1,) tensors from Python, " + mode.label(),
                jit ? Goal.p50AtMost(5_000) : Goal.context("context")));
        }
        String trace = null;
        Path logs = options.report().toAbsolutePath().getParent().resolve("python-bench");
        Files.createDirectories(logs);
        for (int run = 0; run < options.runs(); run++) {
            for (Mode mode : modes) {
                Map<String, List<Long>> lines = runScript(root, launcher, script, mode, logs.resolve("run" + run + "-" + mode.jit()),
                    List.of(rounds, warmup, ops, awaits, warmupAwaits, torchBatches, torchWarmup));
                Samples javaClient;
                try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).build())) { // not running beside the Python process
                    javaClient = PipelineBenchmark.clientCost(dt, dt.defaultMesh(), ops, JAVA_WARMUP_ROUNDS, rounds).wall();
                }
                enqueue.get(mode.label()).add(samples("Python, " + mode.label(), lines.get("SAMPLES enqueue")), javaClient);
                wakeup.get(mode.label()).add(samples("dtorch future", lines.get("SAMPLES await")),
                    samples("asyncio `call_soon_threadsafe` from a Python thread", lines.get("SAMPLES asyncio")));
                torchAdd.get(mode.label()).add(samples("Python `torch.add`, " + mode.label(), lines.get("SAMPLES torch_add")),
                    javaTorchAdd(torchBatches, Math.min(torchWarmup, 20_000)));
                if (trace == null && mode.jit().equals("on")) {
                    trace = lines.get("TRACE enqueue").stream().map(v -> String.format(Locale.ROOT, "%.1f", v / 1e3))
                        .collect(Collectors.joining(", "));
                }
            }
        }
        List<Comparison> rows = new ArrayList<>();
        for (Mode mode : modes) {
            rows.add(enqueue.get(mode.label()));
        }
        for (Mode mode : modes) {
            rows.add(wakeup.get(mode.label()));
        }
        for (Mode mode : modes) {
            rows.add(torchAdd.get(mode.label()));
        }
        report.comparisons(rows);
        report.note("Per-round enqueue cost in the first run with the JIT, warm-up rounds included, in order (us): " + trace + ".");
    }

    /** {@code torch.add} of two (1,) tensors from Java through Bytedeco, timed in batches as the Python script times it. */
    static Samples javaTorchAdd(int batches, int warmup) {
        Samples samples = new Samples("Java, `torch.add` through Bytedeco");
        try (Tensor a = torch.ones(1); Tensor b = torch.ones(1)) {
            for (int i = -warmup; i < batches; i++) {
                long start = System.nanoTime();
                for (int k = 0; k < TORCH_BATCH; k++) {
                    torch.add(a, b).close();
                }
                long elapsed = System.nanoTime() - start;
                if (i >= 0) {
                    samples.add(elapsed / TORCH_BATCH);
                }
            }
        }
        return samples;
    }

    private static Samples samples(String name, List<Long> values) {
        Samples samples = new Samples(name);
        values.forEach(samples::add);
        return samples;
    }

    /** Runs the script once; its {@code SAMPLES} and {@code TRACE} lines by kind and name ({@code SAMPLES enqueue}). */
    private static Map<String, List<Long>> runScript(Path root, Path launcher, Path script, Mode mode, Path logPrefix, List<Integer> args)
        throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(launcher.toString(), "run", "--devices", "cpu:1", script.toString()));
        args.forEach(a -> command.add(String.valueOf(a)));
        Path out = Path.of(logPrefix + ".out");
        Path err = Path.of(logPrefix + ".err");
        ProcessBuilder builder = new ProcessBuilder(command).directory(root.toFile()).redirectOutput(out.toFile()).redirectError(err.toFile());
        builder.environment().put("DTORCH_JIT", mode.jit());
        builder.environment().put("DTORCH_SERVER", "off"); // each run in a fresh JVM, as the section says
        Process process = builder.start();
        if (!process.waitFor(PROCESS_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException("python benchmark (" + mode.label() + ") did not finish within " + PROCESS_TIMEOUT_SECONDS
                + " s; killed it; its output: " + out + ", " + err);
        }
        if (process.exitValue() != 0) {
            throw new IllegalStateException("python benchmark (" + mode.label() + ") exited with " + process.exitValue() + ": "
                + tail(err));
        }
        Map<String, List<Long>> lines = new HashMap<>();
        for (String line : Files.readAllLines(out, StandardCharsets.UTF_8)) {
            String[] parts = line.strip().split(" ");
            if (parts.length >= 2 && (parts[0].equals("SAMPLES") || parts[0].equals("TRACE"))) {
                lines.put(parts[0] + " " + parts[1], Arrays.stream(parts).skip(2).map(Long::parseLong).toList());
            }
        }
        for (String expected : List.of("SAMPLES enqueue", "TRACE enqueue", "SAMPLES await", "SAMPLES asyncio", "SAMPLES torch_add")) {
            if (!lines.containsKey(expected) || lines.get(expected).isEmpty()) {
                throw new IllegalStateException("python benchmark (" + mode.label() + ") printed no '" + expected + "' line; see " + out
                    + " and " + err);
            }
        }
        return lines;
    }

    private static String tail(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    }
}
