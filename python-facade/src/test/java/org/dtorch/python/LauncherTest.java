package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.runtime.process.JvmCommand;
import org.dtorch.core.runtime.process.NodeSpec;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dtorch run}: exit codes, arguments, tracebacks, one-line errors for bad input, and quiet output. The launches in
 * this JVM get their script's host through {@link ScriptBytecode#launch}, on an engine that reads the test JVM's
 * compiled modules; the launches in a JVM of their own (and QuickstartTest's) make it as {@code ./dtorch run} does.
 */
@Timeout(180)
class LauncherTest {
    private static final String SHARDED_SCRIPT = String.join("\n",
        "import dtorch",
        "mesh = dtorch.init_device_mesh('cpu', (2,))",
        "x = dtorch.arange(8, device_mesh=mesh, placements=[dtorch.Shard(0)])",
        "y = (x * 2).redistribute(mesh, [dtorch.Replicate()])",
        "assert y.to_torch().tolist() == [0, 2, 4, 6, 8, 10, 12, 14], y.to_torch().tolist()",
        "assert y.sum().to_torch().item() == 56",
        "");

    /** A token of the length {@code ClusterToken} asks for. */
    static final String TOKEN = "launcher-test-token-0123456789";

    private static int launch(String... args) {
        return ScriptBytecode.launch(args);
    }

    /** What a launch printed on the JVM's standard streams, and its exit code. */
    record Outcome(int status, String out, String err) {
        List<String> errLines() {
            return err.lines().filter(line -> !line.isBlank()).toList();
        }
    }

    static Outcome capture(Supplier<Integer> body) {
        PrintStream originalOut = System.out;
        PrintStream originalErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        int status;
        try {
            status = body.get();
        } finally {
            System.setOut(originalOut);
            System.setErr(originalErr);
        }
        return new Outcome(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    /** The launch fails with exit code 2 and one line on standard error that contains every one of {@code expected}. */
    private static String assertRejected(String[] args, String... expected) {
        return assertRejected(Map.of(), args, expected);
    }

    /** {@link #assertRejected(String[], String...)} with {@code env} as the environment the launcher reads. */
    static String assertRejected(Map<String, String> env, String[] args, String... expected) {
        Outcome outcome = capture(() -> Launcher.run(args, env));
        String shown = String.join(" ", args) + " printed:\n" + outcome.err;
        assertEquals(2, outcome.status, shown);
        List<String> lines = outcome.errLines();
        assertEquals(1, lines.size(), shown);
        String line = lines.getFirst();
        assertTrue(line.startsWith("dtorch: "), shown);
        assertFalse(line.contains("Exception") || line.contains("\tat "), shown);
        for (String part : expected) {
            assertTrue(line.contains(part), "expected '" + part + "' in: " + shown);
        }
        return line;
    }

    static String[] args(String... values) {
        return values;
    }

    @Test
    void shouldReturnTheScriptsExitCodeAndPassItsArgumentsUntouched(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("exit.py");
        Files.writeString(script, "import sys, dtorch\n"
            + "assert sys.argv[1:] == ['a', '--probe-jit', '--devices', 'x', '--', '@b'], sys.argv\n"
            + "assert dtorch.device_count() == 2\nraise SystemExit(3)\n");
        assertEquals(3, launch("run", "--devices", "cpu:2", "--same-device", script.toString(), "a", "--probe-jit", "--devices", "x",
            "--", "@b"));
        Path ok = dir.resolve("ok.py");
        Files.writeString(ok, "import dtorch\nassert dtorch.ones(2).sum().to_torch().item() == 2.0\n");
        assertEquals(0, launch("run", ok.toString()));
    }

    @Test
    void shouldStartInTheStrictModeWhenAsked(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("strict.py");
        Files.writeString(script, "import dtorch\nfrom dtorch import Shard\n"
            + "mesh = dtorch.init_device_mesh('cpu', (2,))\n"
            + "rows = dtorch.ones(4, 4, device_mesh=mesh, placements=[Shard(0)])\n"
            + "cols = dtorch.ones(4, 4, device_mesh=mesh, placements=[Shard(1)])\n"
            + "strict = not dtorch.implicit_redistribution()\n"
            + "try:\n    rows + cols\n    refused = False\nexcept dtorch.ShardingError:\n    refused = True\n"
            + "raise SystemExit(0 if strict and refused else 5)\n");
        assertEquals(0, launch("run", "--devices", "cpu:2", "--strict-redistribution", script.toString()), "strict: refused");
    }

    @Test
    @Tag("multiprocess")
    void shouldRunAScriptWithAWorkerProcessPerDeviceQuietly(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("processes.py");
        Files.writeString(script, SHARDED_SCRIPT);
        Outcome outcome = capture(() -> launch("run", "--devices", "cpu:2", "--per-device-process", script.toString()));
        assertEquals(0, outcome.status, outcome.err);
        // The workers' output is forwarded to this JVM's standard error; Gloo's connection lines are not in it.
        assertFalse(outcome.err.contains("[Gloo]"), outcome.err);
    }

    /** Tagged {@code slow}: every build checks that a normal run prints none of Gloo's lines (above). */
    @Test
    @Tag("multiprocess")
    @Tag("slow")
    void shouldShowGlooConnectionLinesOfWorkersAtLogLevelInfo(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("processes.py");
        Files.writeString(script, SHARDED_SCRIPT);
        Outcome outcome = capture(() -> launch("run", "--log-level", "info", "--devices", "cpu:2", "--per-device-process",
            script.toString()));
        assertEquals(0, outcome.status, outcome.err);
        assertTrue(outcome.err.contains("[Gloo] Rank 0 is connected to 1 peer ranks")
            && outcome.err.contains("[Gloo] Rank 1 is connected to 1 peer ranks"), outcome.err);
    }

    /**
     * Gloo writes to the process's own standard output (C++ std::cout), so this runs the launcher in a JVM of its own
     * (slow: a JVM with GraalPy and two worker JVMs for one line of output).
     */
    @Test
    @Tag("multiprocess")
    @Tag("slow")
    void shouldNotPrintGlooConnectionLinesOnANormalRun(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = dir.resolve("threads.py");
        Files.writeString(script, SHARDED_SCRIPT + "print('script done')\n");
        Outcome outcome = launchInJvm(dir, Map.of(), "run", "--devices", "cpu:2", script.toString());
        assertEquals(0, outcome.status, outcome.out);
        assertTrue(outcome.out.contains("script done"), outcome.out);
        assertFalse(outcome.out.contains("[Gloo]"), outcome.out);
    }

    @Test
    @Tag("multiprocess")
    void shouldReportABadConfigurationPropertyInOneLine(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = dir.resolve("ok.py");
        Files.writeString(script, "pass\n");
        Outcome outcome = launchInJvm(dir, Map.of("dtorch.comm.timeoutSeconds", "0"), "run", script.toString());
        List<String> lines = outcome.out.lines().filter(line -> !line.isBlank()).toList();
        assertEquals(2, outcome.status, outcome.out);
        assertEquals(1, lines.size(), outcome.out);
        assertTrue(lines.getFirst().startsWith("dtorch: ") && lines.getFirst().contains("timeout"), outcome.out);
        assertFalse(outcome.out.contains("Exception") || outcome.out.contains("\tat "), outcome.out);
    }

    @Test
    void shouldPrintThePythonTracebackAndFailOnAnUncaughtError(@TempDir Path dir) throws IOException {
        Path script = dir.resolve("broken.py");
        Files.writeString(script, "import dtorch\n\ndef inner():\n    return dtorch.zeros(3, device_mesh=dtorch.init_device_mesh('cpu', (4,)),"
            + " placements=[dtorch.Shard(1)])\n\ninner()\n");
        Outcome outcome = capture(() -> launch("run", "--log-level", "warning", script.toString()));
        assertEquals(1, outcome.status);
        assertTrue(outcome.err.contains("Traceback (most recent call last):") && outcome.err.contains("broken.py\", line 4, in inner")
            && outcome.err.contains("ValueError") && outcome.err.contains("is out of range for a tensor of shape [3]"), outcome.err);
    }

    @Test
    void shouldRejectBadDeviceSpecificationsInOneLine(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "pass\n").toString();
        assertRejected(args("run", "--devices", "cpu:x", script), "--devices", "cpu:x", "cpu:N");
        assertRejected(args("run", "--devices", "cpu:0", script), "cpu:0", "cpu:N", "from 1");
        assertRejected(args("run", "--devices", "cpu:-1", script), "cpu:-1", "cpu:N");
        assertRejected(args("run", "--devices", "4", script), "'4'", "cpu:N");
        assertRejected(args("run", "--devices", "cuda:0", script), "cuda:0", "cpu:N or cuda:N", "from 1");
        assertRejected(args("run", "--devices", "cuda:x", script), "cuda:x", "cuda:N");
        assertRejected(args("run", "--devices", "cuda:4097", script), "cuda:4097", "to 4096");
        assertRejected(args("run", "--devices", "tpu:1", script), "tpu", "cpu:N or cuda:N");
        assertRejected(args("run", "--devices", "cpu:99999999999", script), "cpu:N");
    }

    /**
     * {@code --devices cuda:N} parses on every build; where CUDA cannot run (the default build: CPU natives only) the
     * runtime's {@code CudaUnavailableException} is the one line, naming the fix, with exit code 2 and nothing started.
     */
    @Test
    void shouldAnswerCudaDevicesInOneLineNamingTheFixWhereCudaIsUnavailable(@TempDir Path dir) throws IOException {
        assumeFalse(Cuda.isAvailable(), "CUDA is available here: QuickstartCudaTest runs the launcher on cuda");
        String script = Files.writeString(dir.resolve("never.py"), "raise SystemExit(7)\n").toString();
        String reason = Cuda.unavailableReason();
        String line = assertRejected(args("run", "--devices", "cuda:2", script), "cuda:0 is not usable", reason);
        if (reason.contains("CPU natives only")) {
            assertTrue(line.contains("mvn -B -Pgpu -DskipTests install"), line);
        }
        assertRejected(args("run", "--devices", "cuda:4", "--same-device", script), reason);
        // Per-device-process mode on CUDA is the runtime's to answer; here CUDA itself is missing, which it says first.
        assertRejected(args("run", "--devices", "cuda:2", "--per-device-process", script), reason);
    }

    @Test
    void shouldRejectBadTimeoutsAndLogLevelsInOneLine(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "pass\n").toString();
        assertRejected(args("run", "--timeout-seconds", "0", script), "--timeout-seconds", "'0'", "seconds from 1");
        assertRejected(args("run", "--timeout-seconds", "x", script), "--timeout-seconds", "'x'", "seconds from 1");
        assertRejected(args("run", "--timeout-seconds", "-5", script), "--timeout-seconds", "seconds from 1");
        assertRejected(args("run", "--log-level", "debug", script), "--log-level", "'debug'", "warning", "info", "fine");
    }

    @Test
    void shouldWriteTheTraceOfTheRunAndTakeTheMemoryGrowthSettings(@TempDir Path dir) throws IOException {
        // The sharded script, then 16 more bytes kept on device 0 at each of 3 syncs: 2 growths warn with these settings
        // (the defaults, 10 syncs and 1 GiB, would not).
        Path script = Files.writeString(dir.resolve("traced.py"), SHARDED_SCRIPT + String.join("\n",
            "kept = []",
            "for _ in range(3):",
            "    kept.append(dtorch.ones(4))",
            "    dtorch.sync()",
            "warned = dtorch.memory_stats(0)['sync.growth_warnings']",
            "assert warned == 1, warned",
            ""));
        Path trace = dir.resolve("trace.json");
        assertEquals(0, launch("run", "--devices", "cpu:2", "--trace", trace.toString(), "--memory-growth-syncs", "2",
            "--memory-growth-floor", "16", script.toString()));

        JsonNode events = new ObjectMapper().readTree(trace.toFile()).get("traceEvents");
        List<String> enqueued = new java.util.ArrayList<>();
        List<String> kernels = new java.util.ArrayList<>();
        events.forEach(e -> {
            String category = e.path("cat").asText();
            if (e.get("name").asText().equals("redistribute") && (category.equals("client") || category.equals("kernel"))) {
                (category.equals("client") ? enqueued : kernels).add(e.get("args").path("device").asText());
            }
        });
        assertFalse(enqueued.isEmpty(), "no redistribution in " + trace);
        List<String> onEachDevice = java.util.stream.Stream.of("0", "1").flatMap(d -> java.util.Collections.nCopies(enqueued.size(), d)
            .stream()).toList();
        assertEquals(onEachDevice, kernels.stream().sorted().toList(), "the kernels of the redistributions in " + trace);
    }

    @Test
    void shouldRejectBadTracePathsAndMemoryGrowthSettingsInOneLine(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "pass\n").toString();
        assertRejected(args("run", "--trace", dir.resolve("missing/trace.json").toString(), script), "trace", "no directory");
        assertRejected(args("run", "--trace", dir.toString(), script), "trace", "is a directory");
        assertRejected(args("run", "--trace"), "--trace");
        assertRejected(args("run", "--memory-growth-syncs", "-1", script), "--memory-growth-syncs", "'-1'", "syncs from 0");
        assertRejected(args("run", "--memory-growth-syncs", "3000000000", script), "--memory-growth-syncs", "syncs from 0");
        assertRejected(args("run", "--memory-growth-floor", "1GiB", script), "--memory-growth-floor", "'1GiB'", "bytes");
    }

    @Test
    void shouldRejectMissingValuesUnknownOptionsAndCommandsInOneLine(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "pass\n").toString();
        assertRejected(args(), "usage: dtorch run");
        assertRejected(args("frobnicate", script), "frobnicate", "usage: dtorch run");
        assertRejected(args("run"), "script", "usage: dtorch run");
        assertRejected(args("run", "--devices"), "--devices", "cpu:N");
        assertRejected(args("run", "--timeout-seconds"), "--timeout-seconds");
        assertRejected(args("run", "--log-level"), "--log-level");
        assertRejected(args("run", "--timeout-seconds", "--same-device", script), "--timeout-seconds");
        assertRejected(args("run", "--bogus", script), "--bogus", "usage: dtorch run", "--devices cpu:N");
        assertRejected(args("run", "--devices", "cpu:2", "--devices", "cpu:3", script), "--devices");
    }

    @Test
    void shouldRejectScriptsThatCannotBeRunInOneLine(@TempDir Path dir) throws IOException {
        assertRejected(args("run", dir.resolve("missing.py").toString()), "missing.py", "no such file");
        assertRejected(args("run", dir.toString()), dir.getFileName().toString(), "directory");
    }

    @Test
    void shouldRejectAnUnreadableScriptInOneLine(@TempDir Path dir) throws IOException {
        Path script = Files.writeString(dir.resolve("secret.py"), "pass\n");
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("---------"));
        assumeFalse(Files.isReadable(script), "the file stays readable (tests run as root)");
        assertRejected(args("run", script.toString()), "secret.py", "cannot read");
    }

    @Test
    void shouldRefuseMoreWorkerJvmsThanTheMachineCanCarry(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "pass\n").toString();
        int limit = Runtime.getRuntime().availableProcessors() * Launcher.DEVICES_PER_CPU;
        String line = assertRejected(args("run", "--per-device-process", "--devices", "cpu:" + (limit + 1), script),
            "cpu:" + (limit + 1), "worker JVM", String.valueOf(limit));
        assertTrue(line.contains(Runtime.getRuntime().availableProcessors() + " CPU"), line);
    }

    @Test
    void shouldWarnAboutMoreDeviceThreadsThanTheMachineCanCarry(@TempDir Path dir) throws IOException {
        int limit = Runtime.getRuntime().availableProcessors() * Launcher.DEVICES_PER_CPU;
        assumeTrue(limit < 256, "a machine this large would start " + (limit + 1) + " device threads");
        String script = Files.writeString(dir.resolve("count.py"), "import dtorch\nassert dtorch.device_count() == " + (limit + 1) + "\n")
            .toString();
        Outcome outcome = capture(() -> launch("run", "--same-device", "--devices", "cpu:" + (limit + 1), script));
        assertEquals(0, outcome.status, outcome.err);
        assertTrue(outcome.err.lines().anyMatch(l -> l.startsWith("dtorch: warning: ") && l.contains(String.valueOf(limit))), outcome.err);
    }

    /**
     * DTorch's simulation switch: {@code DTORCH_DTENSOR_IN_SAME_DEVICE=1} is {@code --same-device} with
     * {@code DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE} devices (default 8); the command line wins where it
     * says otherwise; a value it does not understand is one line and exit code 2.
     */
    @Test
    void shouldHonourTheSameDeviceSimulationSwitchOfTheEnvironment(@TempDir Path dir) throws IOException {
        SameDeviceSwitch three = SameDeviceSwitch.from(Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "TRUE",
            "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "3"));
        assertEquals(new SameDeviceSwitch(true, 3), three);
        assertEquals(new SameDeviceSwitch(true, 8), SameDeviceSwitch.from(Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "1")));
        assertEquals(SameDeviceSwitch.OFF, SameDeviceSwitch.from(Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "0")));
        assertEquals(SameDeviceSwitch.OFF, SameDeviceSwitch.from(Map.of()));

        Launcher.RunCommand fromEnvironment = Launcher.parseRun(Map.of(), "x.py");
        fromEnvironment.applyEnvironment(three);
        assertTrue(fromEnvironment.sameDevice());
        assertEquals(3, fromEnvironment.devices().count());
        Launcher.RunCommand flagsWin = Launcher.parseRun(Map.of(), "--devices", "cpu:2", "x.py");
        flagsWin.applyEnvironment(three);
        assertTrue(flagsWin.sameDevice());
        assertEquals(new Launcher.DeviceSpec(org.dtorch.core.device.DeviceKind.CPU, 2), flagsWin.devices());
        Launcher.RunCommand off = Launcher.parseRun(Map.of(), "x.py");
        off.applyEnvironment(SameDeviceSwitch.OFF);
        assertFalse(off.sameDevice());

        Path script = dir.resolve("simulated.py");
        Files.writeString(script, String.join("\n",
            "import dtorch",
            "assert dtorch.device_count() == 3, dtorch.device_count()",
            "mesh = dtorch.init_device_mesh(dtorch.device_type(), (3,))",
            "x = dtorch.arange(6, device_mesh=mesh, placements=[dtorch.Shard(0)])",
            "assert x.redistribute(mesh, [dtorch.Replicate()]).sum().to_torch().item() == 15",
            ""));
        Outcome outcome = capture(() -> Launcher.run(args("run", script.toString()), Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "1",
            "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "3")));
        assertEquals(0, outcome.status, outcome.err);

        for (Map<String, String> bad : List.of(Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "yes"),
            Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "0"),
            Map.of("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE", "x"))) {
            Outcome rejected = capture(() -> Launcher.run(args("run", script.toString()), bad));
            assertEquals(2, rejected.status, rejected.err);
            assertEquals(1, rejected.errLines().size(), rejected.err);
            assertTrue(rejected.err.startsWith("dtorch: DTORCH_"), rejected.err);
        }
    }

    @Test
    void shouldTakeTheNodeOptionsFromTheFlagsElseFromTorchrunsEnvironmentVariables() {
        Map<String, String> token = Map.of("DTORCH_TOKEN", TOKEN);
        NodeSpec defaults = Launcher.parseRun(Map.of(), "--nnodes", "2", "x.py").nodes().spec(3, token);
        assertEquals(List.of(2, 0, new RendezvousAddress("127.0.0.1", 29500), 3, 6), facts(defaults));
        assertNull(Launcher.parseRun(Map.of(), "x.py").nodes().spec(4, Map.of()), "one node: no spec, no token needed");

        Map<String, String> env = new HashMap<>(token);
        env.putAll(Map.of("NNODES", "3", "NODE_RANK", "2", "MASTER_ADDR", "10.77.0.1", "MASTER_PORT", "1234"));
        assertEquals(List.of(3, 2, new RendezvousAddress("10.77.0.1", 1234), 2, 6),
            facts(Launcher.parseRun(env, "x.py").nodes().spec(2, env)));
        NodeSpec flagsWin = Launcher.parseRun(env, "--nnodes", "4", "--node-rank", "1", "--master-addr", "node0.example",
            "--master-port", "29400", "x.py").nodes().spec(1, env);
        assertEquals(List.of(4, 1, new RendezvousAddress("node0.example", 29400), 1, 4), facts(flagsWin));
        // A flag given makes its variable irrelevant, even a variable that is not valid.
        assertEquals(2, Launcher.parseRun(Map.of("NNODES", "many"), "--nnodes", "2", "x.py").nodes().nodes());
    }

    private static List<Object> facts(NodeSpec spec) {
        return List.of(spec.nodes(), spec.nodeRank(), spec.master(), spec.devicesPerNode(), spec.deviceCount());
    }

    @Test
    void shouldRejectBadNodeOptionsAndVariablesInOneLineBeforeAnythingStarts(@TempDir Path dir) throws IOException {
        String script = Files.writeString(dir.resolve("ok.py"), "raise SystemExit(7)\n").toString();
        Map<String, String> token = Map.of("DTORCH_TOKEN", TOKEN);
        assertRejected(token, args("run", "--nnodes", "0", script), "--nnodes", "'0'", "nodes from 1");
        assertRejected(token, args("run", "--nnodes", "x", script), "--nnodes", "'x'", "nodes from 1");
        assertRejected(token, args("run", "--node-rank", "-1", script), "--node-rank", "'-1'");
        assertRejected(token, args("run", "--nnodes", "2", "--node-rank", "2", script), "node rank 2", "run of 2 nodes", "0 to 1");
        assertRejected(token, args("run", "--node-rank", "1", script), "node rank 1", "run of 1 node ", "0 to 0");
        assertRejected(token, args("run", "--master-port", "0", script), "--master-port", "'0'", "1 to 65535");
        assertRejected(token, args("run", "--master-port", "65536", script), "--master-port", "'65536'", "1 to 65535");
        assertRejected(token, args("run", "--master-addr", "", script), "--master-addr", "host name or address");
        assertRejected(token, args("run", "--master-addr", "a b", script), "--master-addr", "'a b'");
        assertRejected(Map.of("NNODES", "two"), args("run", script), "environment variable NNODES", "--nnodes", "'two'");
        assertRejected(Map.of("NODE_RANK", "-3"), args("run", script), "NODE_RANK", "--node-rank", "'-3'");
        assertRejected(Map.of("MASTER_PORT", "70000"), args("run", script), "MASTER_PORT", "'70000'", "1 to 65535");
        assertRejected(Map.of("MASTER_ADDR", " "), args("run", script), "MASTER_ADDR", "host name or address");
        assertRejected(Map.of("NNODES", "2", "NODE_RANK", "5", "DTORCH_TOKEN", TOKEN), args("run", script), "node rank 5",
            "NODE_RANK", "NNODES");

        assertRejected(token, args("run", "--nnodes", "2", "--same-device", script), "--same-device", "2 nodes", "worker process");
        assertRejected(Map.of("DTORCH_TOKEN", TOKEN, "NNODES", "2", "DTORCH_DTENSOR_IN_SAME_DEVICE", "1"), args("run", script),
            "DTORCH_DTENSOR_IN_SAME_DEVICE", "2 nodes");
        assertRejected(token, args("run", "--nnodes", "2", "--per-device-process", script), "--per-device-process", "--nnodes 2",
            "worker process already");
        int limit = Runtime.getRuntime().availableProcessors() * Launcher.DEVICES_PER_CPU;
        assertRejected(token, args("run", "--nnodes", "2", "--node-rank", "1", "--devices", "cpu:" + (limit + 1), script),
            "cpu:" + (limit + 1), "on each of 2 nodes", "worker JVMs", "fewer devices per node");

        assertRejected(Map.of(), args("run", "--nnodes", "2", script), "2 nodes needs a shared token", "DTORCH_TOKEN", "--token-file");
        assertRejected(Map.of("DTORCH_TOKEN", "short"), args("run", "--nnodes", "2", script), "5 bytes", "at least 16");
        Path open = Files.writeString(dir.resolve("token"), TOKEN + "\n");
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rw-r--r--"));
        assertRejected(Map.of(), args("run", "--nnodes", "2", "--token-file", open.toString(), script), "token file", "0644",
            "chmod 600");
        assertRejected(Map.of(), args("run", "--nnodes", "2", "--token-file", dir.resolve("none").toString(), script),
            "token file", "does not exist");
        // Nodes other than 0 do not read the script: a missing one is no error there, but a missing token still is.
        assertRejected(Map.of(), args("run", "--nnodes", "2", "--node-rank", "1", dir.resolve("absent.py").toString()), "shared token");
        assertRejected(token, args("run", "--nnodes", "2", dir.resolve("absent.py").toString()), "absent.py", "no such file");
    }

    @Test
    void shouldPrintHelpAndExitZero() {
        Outcome outcome = capture(() -> launch("run", "--help"));
        assertEquals(0, outcome.status, outcome.err);
        for (String option : List.of("--devices", "--same-device", "--per-device-process", "--isolated", "--strict-redistribution",
            "--timeout-seconds", "--log-level",
            "--trace", "--memory-growth-syncs", "--memory-growth-floor", "--nnodes", "--node-rank", "--master-addr", "--master-port",
            "--token-file", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "DTORCH_TOKEN", "per node")) {
            assertTrue(outcome.out.contains(option), outcome.out);
        }
        // The help shows the defaults, not the environment's values, so a variable that is not valid does not break it.
        assertEquals(0, capture(() -> Launcher.run(args("run", "--help"), Map.of("NNODES", "x", "MASTER_PORT", "0"))).status);
        assertEquals(0, capture(() -> launch("--help")).status);
    }

    /** Runs the launcher in a JVM of its own (standard output and error together); fails after a deadline. */
    private static Outcome launchInJvm(Path dir, Map<String, String> properties, String... args) throws IOException, InterruptedException {
        Path output = dir.resolve("launcher.out");
        Map<String, String> childProperties = new java.util.HashMap<>(properties);
        childProperties.put("java.io.tmpdir", dir.toString());
        ProcessBuilder builder = JvmCommand.of(Launcher.class.getName(), List.of(args), childProperties, List.of()).processBuilder();
        builder.redirectErrorStream(true).redirectOutput(output.toFile());
        Process process = builder.start();
        try {
            if (!process.waitFor(150, TimeUnit.SECONDS)) {
                throw new AssertionError("the launcher (" + String.join(" ", args) + ") did not exit within 150 s; its output:\n"
                    + Files.readString(output));
            }
        } finally {
            process.destroyForcibly();
        }
        return new Outcome(process.exitValue(), Files.readString(output), "");
    }
}
