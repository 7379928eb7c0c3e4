package org.dtorch.python;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.group.GlooLog;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.MemoryWatch;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.NodeAgent;
import org.dtorch.core.runtime.process.NodeSpec;
import org.dtorch.core.shm.UnsafePathException;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code dtorch run [--devices cpu:N|cuda:N] [--same-device] [--per-device-process] [--isolated] [--strict-redistribution]
 * [--timeout-seconds N] [--log-level LEVEL] [--trace FILE] [--memory-growth-syncs N] [--memory-growth-floor BYTES] [--nnodes N --node-rank R
 * --master-addr HOST --master-port PORT --token-file FILE] script.py [args...]}: runs a Python script on a DTorch
 * runtime and exits with the script's exit code; across nodes ({@link NodeOptions}) node 0 does so and every other node
 * serves its devices ({@link NodeAgent}) and exits with the agent's status. Everything after the script goes to the
 * script. Bad input (an option, a value, the script) gets one line on standard error naming the problem and the
 * accepted forms, and exit code 2, before anything starts; so does a bad {@code dtorch.*} system property the runtime
 * rejects when it starts, CUDA devices this process cannot use (the runtime's {@link CudaUnavailableException}, whose
 * message names what is missing and the fix: on the default build, the one command that builds the GPU natives), a
 * combination of options the runtime does not run, and a run across nodes that does not assemble (a node missing at the
 * deadline, a wrong token).
 *
 * <p>{@code --probe-jit}, as the only argument, prints the GraalPy engine's implementation ({@code GraalVM CE} when the
 * optimizing JIT is on) and exits; the {@code dtorch} script uses it once to choose how to start the JVM.
 *
 * <p>Not thread-safe: a program entry point.
 */
public final class Launcher {
    /**
     * With {@code --per-device-process}, at most this many worker JVMs per CPU; in thread mode, more device threads
     * than this per CPU get a warning.
     */
    static final int DEVICES_PER_CPU = 8;
    /** The largest device count {@code --devices} takes. */
    static final int MAX_DEVICES = 4096;
    /** The longest {@code --timeout-seconds}: a year. */
    static final long MAX_TIMEOUT_SECONDS = 365L * 24 * 3600;

    private static final String SYNOPSIS = "dtorch run [--devices cpu:N|cuda:N] [--same-device] [--per-device-process] "
        + "[--isolated] [--strict-redistribution] [--timeout-seconds N] [--log-level LEVEL] [--trace FILE] [--memory-growth-syncs N] "
        + "[--memory-growth-floor BYTES] "
        + "[--nnodes N --node-rank R --master-addr HOST --master-port PORT --token-file FILE] script.py [args...]";
    private static final String USAGE = "usage: " + SYNOPSIS;
    private static final int BAD_INPUT = 2;

    private Launcher() {
    }

    public static void main(String[] args) {
        int code = run(args);
        ServerSpawn.afterRun(System.getenv());
        System.exit(code);
    }

    /** Runs the command line with this process's environment; returns the exit code. */
    static int run(String[] args) {
        return run(args, System.getenv());
    }

    /** Runs the command line with {@code env} as the environment it reads; returns the exit code. */
    static int run(String[] args, Map<String, String> env) {
        return run(args, env, ScriptHosts.DIRECT);
    }

    /**
     * Runs the command line with {@code env} as the environment it reads and its Python host from {@code hosts} (the
     * runtime server passes its prepared contexts and the client's directory); returns the exit code.
     */
    static int run(String[] args, Map<String, String> env, ScriptHosts hosts) {
        if (args.length == 1 && args[0].equals("--probe-jit")) {
            try (PythonHost host = PythonHost.builder().build()) {
                System.out.println(host.engineImplementation());
            }
            return 0;
        }
        if (args.length == 0) {
            return reject(USAGE);
        }
        RunCommand command = new RunCommand();
        CommandLine line = commandLine(command, env);
        if (args.length == 1 && (args[0].equals("--help") || args[0].equals("-h") || args[0].equals("help"))) {
            line.usage(System.out);
            return 0;
        }
        if (!args[0].equals("run")) {
            return reject("unknown command '" + args[0] + "' (the commands are run and build); " + USAGE);
        }
        try {
            line.parseArgs(Arrays.copyOfRange(args, 1, args.length));
        } catch (CommandLine.ParameterException e) {
            return reject(describe(e));
        }
        if (line.isUsageHelpRequested()) {
            line.usage(System.out);
            return 0;
        }
        SameDeviceSwitch simulation;
        try {
            simulation = SameDeviceSwitch.from(env);
        } catch (IllegalArgumentException e) {
            return reject(e.getMessage());
        }
        command.applyEnvironment(simulation);
        return command.execute(env, hosts);
    }

    /**
     * The {@code run} command as {@code runArgs} (what follows {@code run}) and the node options' environment variables in
     * {@code env} fill it, before the same-device switch applies.
     */
    static RunCommand parseRun(Map<String, String> env, String... runArgs) {
        RunCommand command = new RunCommand();
        commandLine(command, env).parseArgs(runArgs);
        return command;
    }

    private static CommandLine commandLine(RunCommand command, Map<String, String> env) {
        return new CommandLine(command)
            .setDefaultValueProvider(command.nodes().environmentDefaults(env))
            .setStopAtPositional(true)      // everything after the script is the script's
            .setExpandAtFiles(false)        // an argument such as @file is the script's, not picocli's
            .setOverwrittenOptionsAllowed(false)
            .setOut(new java.io.PrintWriter(System.out, true))
            .setErr(new java.io.PrintWriter(System.err, true));
    }

    /** One line for picocli's complaint; usage errors (an unknown option, a missing value or script) get the synopsis. */
    private static String describe(CommandLine.ParameterException e) {
        if (e instanceof CommandLine.UnmatchedArgumentException unmatched && !unmatched.getUnmatched().isEmpty()) {
            return "unknown option '" + unmatched.getUnmatched().getFirst() + "'; " + USAGE;
        }
        if (e instanceof CommandLine.MissingParameterException missing
            && missing.getMissing().stream().anyMatch(arg -> !arg.isOption())) {
            return "no script given; " + USAGE;
        }
        String message = Objects.requireNonNullElse(e.getMessage(), e.getClass().getSimpleName()).lines().findFirst().orElse("");
        message = message.isEmpty() ? message : Character.toLowerCase(message.charAt(0)) + message.substring(1);
        return e instanceof CommandLine.MissingParameterException ? message + "; " + USAGE : message;
    }

    private static int reject(String problem) {
        System.err.println("dtorch: " + problem);
        return BAD_INPUT;
    }

    /** Why {@code script} (relative to {@code base}) cannot be run, or null. */
    private static String scriptProblem(Path base, String script) {
        Path path;
        try {
            path = base.resolve(script);
        } catch (InvalidPathException e) {
            return "cannot read script '" + script + "': not a valid path (" + e.getReason() + ")";
        }
        if (!Files.exists(path)) {
            return "cannot read script " + script + ": no such file";
        }
        if (Files.isDirectory(path)) {
            return "cannot read script " + script + ": it is a directory, not a Python file";
        }
        if (!Files.isReadable(path)) {
            return "cannot read script " + script + ": permission denied";
        }
        return null;
    }

    /** Why the trace cannot be written to {@code trace}, or null: its directory must exist, and it must not be one. */
    private static String traceProblem(Path base, String trace) {
        Path path;
        try {
            path = base.resolve(trace).toAbsolutePath();
        } catch (InvalidPathException e) {
            return "cannot write the trace to '" + trace + "': not a valid path (" + e.getReason() + ")";
        }
        if (Files.isDirectory(path)) {
            return "cannot write the trace to " + trace + ": it is a directory; name a file, such as trace.json";
        }
        Path dir = path.getParent();
        if (!Files.isDirectory(dir)) {
            return "cannot write the trace to " + trace + ": no directory " + dir;
        }
        if (!Files.isWritable(dir) || Files.exists(path) && !Files.isWritable(path)) {
            return "cannot write the trace to " + trace + ": permission denied";
        }
        return null;
    }

    /** The options of {@code dtorch run}, filled by picocli. */
    @Command(name = "dtorch run", customSynopsis = SYNOPSIS, sortOptions = false, usageHelpWidth = 110,
        description = {"Runs a Python script (GraalPy) on a DTorch runtime and exits with its exit code.",
            "Arguments after the script are the script's (sys.argv[1:])."},
        footer = {"", "dtorch build rebuilds the project; DTORCH_JIT=off runs GraalPy without its optimizing JIT.",
            "CUDA devices need the GPU natives: mvn -B -Pgpu -DskipTests install (then dtorch run --devices cuda:N ...).",
            "DTORCH_DTENSOR_IN_SAME_DEVICE=1 is --same-device with DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE devices",
            "(default 8; CUDA where this process can run it, else CPU), unless the options say otherwise.",
            "Across nodes (docs/multi-host.md): the same command on every node but --node-rank; node 0 runs the",
            "script (only node 0 reads it), every other node serves its devices and exits when node 0 ends the run:",
            "0, or 1 when node 0 is lost, 2 when it could not join. Nodes may start in any order.",
            "Bad input exits with code 2 and one line on standard error; so does a run whose nodes did not assemble."})
    static final class RunCommand {
        @Option(names = "--devices", paramLabel = "cpu:N|cuda:N", converter = DevicesConverter.class,
            description = {"N CPU devices (default cpu:4), or N CUDA devices (the -Pgpu build):",
                "cuda:0 to cuda:N-1, or all on cuda:0 with --same-device; N from 1 to " + MAX_DEVICES + ".",
                "With --nnodes, N devices per node, numbered node-major (cpu:2 on 2 nodes:",
                "devices 0 and 1 on node 0, 2 and 3 on node 1)."})
        private DeviceSpec devices;

        @Option(names = "--same-device", description = {"Simulate every device on one (same-device collectives, no Gloo or NCCL):",
            "N ranks on one GPU with --devices cuda:N."})
        private boolean sameDevice;

        @Option(names = "--per-device-process",
            description = "Give every device a worker JVM of its own (at most " + DEVICES_PER_CPU + " per CPU).")
        private boolean perDeviceProcess;

        @Option(names = "--isolated", description = {"Confine the script: its own directory, read-only, and no other files,",
            "no sockets, no processes, no native code (values through tolist() and item())."})
        private boolean isolated;

        @Option(names = "--strict-redistribution", description = {"Refuse operators whose inputs' placements fit none of their",
            "strategies instead of redistributing them implicitly (dtorch.set_implicit_redistribution(False))."})
        private boolean strictRedistribution;

        @Option(names = "--timeout-seconds", paramLabel = "N", converter = TimeoutConverter.class,
            description = {"Deadline of the runtime's blocking calls, 1 to " + MAX_TIMEOUT_SECONDS + " (default 300); with",
                "--nnodes, also of the wait for the other nodes at the start."})
        private Duration timeout;

        @Option(names = "--log-level", paramLabel = "LEVEL", converter = LogLevelConverter.class,
            description = {"off, severe, warning (default), info, config, fine, finer, finest or all.",
                "info and finer also show Gloo's connection lines."})
        private Level logLevel = Level.WARNING;

        @Option(names = "--trace", paramLabel = "FILE", description = {"Record a timeline of the whole run and write it to FILE when",
            "the runtime closes: Chrome trace JSON, for ui.perfetto.dev or chrome://tracing."})
        private String trace;

        @Option(names = "--memory-growth-syncs", paramLabel = "N", converter = SyncsConverter.class,
            description = {"Warn once per device when its tensors' bytes rose at each of N consecutive syncs",
                "(default " + MemoryWatch.DEFAULT_GROWTH_SYNCS + "; 0 never warns) ..."})
        private Integer memoryGrowthSyncs;

        @Option(names = "--memory-growth-floor", paramLabel = "BYTES", converter = BytesConverter.class,
            description = "... and reached BYTES at the last of them (default " + MemoryWatch.DEFAULT_FLOOR_BYTES + ", 1 GiB).")
        private Long memoryGrowthFloor;

        @CommandLine.Mixin
        private NodeOptions nodes = new NodeOptions();

        // Read by the ./dtorch script, which then starts the launcher directly; accepted here so that it parses.
        @Option(names = "--no-server", description = {"Start a JVM for this run instead of using the warm runtime server",
            "(also DTORCH_SERVER=off; docs/configuration.md#the-runtime-server)."})
        private boolean noServer;

        @Option(names = {"-h", "--help"}, usageHelp = true, description = "Show this help.")
        private boolean help;

        @Parameters(index = "0", paramLabel = "script.py", description = "The Python script to run.")
        private String script;

        @Parameters(index = "1..*", paramLabel = "args", description = "The script's arguments.")
        private List<String> scriptArgs = new ArrayList<>();

        /**
         * DTorch's single-device simulation switch, where the command line does not say otherwise: it turns on
         * {@code --same-device}, and gives the device count where {@code --devices} is absent (CUDA devices on a
         * process that can run CUDA, as DTorch simulates GPUs; CPU devices elsewhere).
         */
        void applyEnvironment(SameDeviceSwitch simulation) {
            if (!simulation.enabled()) {
                return;
            }
            sameDevice = true;
            if (devices == null) {
                Cuda.loadNatives();
                devices = new DeviceSpec(Cuda.isAvailable() ? DeviceKind.CUDA : DeviceKind.CPU, simulation.devices());
            }
        }

        /** Whether the run simulates every device on one (the flag, or the environment's switch once applied). */
        boolean sameDevice() {
            return sameDevice;
        }

        /** The devices asked for (the flag, or the environment's switch once applied); null for the default. */
        DeviceSpec devices() {
            return devices;
        }

        /** The node options (flags, or their environment variables). */
        NodeOptions nodes() {
            return nodes;
        }

        /**
         * Checks what picocli cannot, then runs the script (node 0) or serves this node's devices (other nodes); returns
         * the exit code. {@code env} holds the run's token ({@value ClusterToken#ENV}) when no token file is given.
         */
        int execute(Map<String, String> env, ScriptHosts hosts) {
            Path base = hosts.workingDirectory();
            String problem = nodes.problem(sameDevice, perDeviceProcess);
            // Only node 0 reads the script: the others need not have it.
            if (problem == null && nodes.nodeRank() == 0) {
                problem = scriptProblem(base, script);
            }
            if (problem == null && trace != null && nodes.nodeRank() == 0) {
                problem = traceProblem(base, trace);
            }
            if (problem != null) {
                return reject(problem);
            }
            int cpus = Runtime.getRuntime().availableProcessors();
            int limit = cpus * DEVICES_PER_CPU;
            if (devices != null && devices.count() > limit) {
                int count = devices.count();
                if (perDeviceProcess || nodes.nodes() > 1) {
                    return reject("--devices " + devices + (perDeviceProcess ? " with --per-device-process" : " on each of " + nodes.nodes()
                        + " nodes") + " would start " + count + " worker JVMs on " + cpus + " CPUs; at most " + limit + " ("
                        + DEVICES_PER_CPU + " per CPU) are allowed: use fewer devices" + (perDeviceProcess ? ", or device threads "
                        + "(without --per-device-process)" : " per node"));
                }
                System.err.println("dtorch: warning: --devices " + devices + " runs " + count + " device threads on " + cpus
                    + " CPUs (more than " + limit + ", " + DEVICES_PER_CPU + " per CPU): expect slow collectives");
            }
            DeviceSpec perNode = devices != null ? devices : new DeviceSpec(DeviceKind.CPU, DTorchOptions.DEFAULT_DEVICES);
            NodeSpec node;
            try {
                node = nodes.spec(perNode.count(), env);
            } catch (IllegalArgumentException | UnsafePathException | UncheckedIOException e) {
                return reject(oneLine(e.getMessage()));
            }
            try (LogSettings ignored = LogSettings.apply(logLevel)) {
                return node != null && node.nodeRank() > 0 ? serveNode(node, perNode.kind()) : runScript(node, hosts);
            }
        }

        /** Serves this node's devices until node 0 ends the run; {@link NodeAgent#serve}'s exit status. */
        private int serveNode(NodeSpec node, DeviceKind kind) {
            Duration deadline;
            try {
                deadline = timeout != null ? timeout : CommOptions.global().timeout();
            } catch (IllegalArgumentException e) {
                return reject("invalid configuration (dtorch.* system properties): " + rootMessage(e));
            }
            return NodeAgent.serve(node, kind, deadline);
        }

        /** Starts the runtime (node 0 of {@code node}'s run, or alone when null) and runs the script on it. */
        private int runScript(NodeSpec node, ScriptHosts hosts) {
            // libtorch decides once per process whether it has CUDA: its CUDA library loads before any tensor.
            Cuda.loadNatives();
            Path base = hosts.workingDirectory();
            Path scriptPath = Path.of(script);
            DTorch runtime;
            try {
                DTorchOptions.Builder options = DTorchOptions.builder()
                    .sameDevice(sameDevice)
                    .perDevicePerProcess(perDeviceProcess)
                    .implicitRedistribution(!strictRedistribution);
                if (devices != null) {
                    options.deviceKind(devices.kind()).devices(devices.count());
                }
                options.nodes(node); // after the devices: a run across nodes counts every node's
                if (timeout != null) {
                    options.timeout(timeout);
                }
                if (trace != null) {
                    options.trace(base.resolve(trace));
                }
                if (memoryGrowthSyncs != null || memoryGrowthFloor != null) {
                    options.memoryGrowthWarning(Objects.requireNonNullElse(memoryGrowthSyncs, MemoryWatch.DEFAULT_GROWTH_SYNCS),
                        Objects.requireNonNullElse(memoryGrowthFloor, MemoryWatch.DEFAULT_FLOOR_BYTES));
                }
                runtime = DTorch.init(options.build());
            } catch (CudaUnavailableException e) {
                // CUDA asked for where it cannot run; the message names what is missing and the fix.
                return reject(oneLine(e.getMessage()));
            } catch (UnsupportedOperationException e) {
                // A combination of options the runtime does not run (it names the alternative).
                return reject(oneLine(e.getMessage()));
            } catch (CommException e) {
                // The run did not assemble: a node missing at the deadline, a wrong token, a worker that could not start.
                return reject(oneLine(e.getMessage()));
            } catch (IllegalArgumentException | ExceptionInInitializerError e) {
                // A dtorch.* system property the runtime rejects: the configuration, not the script, is wrong.
                return reject("invalid configuration (dtorch.* system properties): " + rootMessage(e));
            }
            Path isolatedDirectory = isolated ? base.resolve(scriptPath).toAbsolutePath().getParent() : null;
            try (runtime; PythonHost python = hosts.open(new PyBridge(runtime), isolatedDirectory)) {
                return python.runScript(scriptPath, base, scriptArgs);
            }
        }

        /** {@code message} on one line: a runtime message with line breaks keeps them as "; ". */
        private static String oneLine(String message) {
            return message == null ? "the runtime refused to start" : String.join("; ", message.lines().map(String::strip)
                .filter(line -> !line.isEmpty()).toList());
        }

        private static String rootMessage(Throwable e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getCause() != cause) {
                cause = cause.getCause();
            }
            String message = cause.getMessage() == null ? cause.getClass().getSimpleName() : cause.getMessage();
            return message.lines().findFirst().orElse(message);
        }
    }

    /**
     * The launcher's log level, in force for one run: the level of the root {@code java.util.logging} logger and its
     * handlers, and {@value GlooLog#VERBOSE_PROPERTY} for {@code info} or finer. {@link #close()} restores what was
     * there before (tests run the launcher several times in one JVM).
     */
    private static final class LogSettings implements AutoCloseable {
        private final Level rootLevel;
        private final Map<Handler, Level> handlerLevels = new HashMap<>();
        private final String glooVerbose;

        private LogSettings() {
            Logger root = Logger.getLogger("");
            rootLevel = root.getLevel();
            for (Handler handler : root.getHandlers()) {
                handlerLevels.put(handler, handler.getLevel());
            }
            glooVerbose = System.getProperty(GlooLog.VERBOSE_PROPERTY);
        }

        static LogSettings apply(Level level) {
            LogSettings previous = new LogSettings();
            Logger root = Logger.getLogger("");
            root.setLevel(level);
            for (Handler handler : root.getHandlers()) {
                handler.setLevel(level);
            }
            if (level.intValue() <= Level.INFO.intValue()) {
                System.setProperty(GlooLog.VERBOSE_PROPERTY, "true");
            }
            return previous;
        }

        @Override
        public void close() {
            Logger.getLogger("").setLevel(rootLevel);
            handlerLevels.forEach(Handler::setLevel);
            if (glooVerbose == null) {
                System.clearProperty(GlooLog.VERBOSE_PROPERTY);
            } else {
                System.setProperty(GlooLog.VERBOSE_PROPERTY, glooVerbose);
            }
        }
    }

    /**
     * What {@code --devices} asks for: {@code count} devices of {@code kind}, printed as given ({@code cuda:4}).
     * Thread-safe: immutable.
     *
     * @param kind  CPU or CUDA
     * @param count from 1 to {@link #MAX_DEVICES}
     */
    record DeviceSpec(DeviceKind kind, int count) {
        @Override
        public String toString() {
            return kind.shortName() + ":" + count;
        }
    }

    /**
     * {@code cpu:N} or {@code cuda:N}, N from 1 to {@link #MAX_DEVICES}. Whether CUDA can run here is the runtime's
     * question ({@link Cuda#require}), answered when it starts: parsing accepts {@code cuda:N} on every build.
     */
    static final class DevicesConverter implements CommandLine.ITypeConverter<DeviceSpec> {
        private static final Pattern FORM = Pattern.compile("([A-Za-z]+):(.*)");
        private static final String EXPECTED = "expected cpu:N or cuda:N with N a whole number from 1 to " + MAX_DEVICES;

        @Override
        public DeviceSpec convert(String value) {
            Matcher m = FORM.matcher(value);
            if (!m.matches()) {
                throw new CommandLine.TypeConversionException(EXPECTED + ", got '" + value + "'");
            }
            DeviceKind kind = switch (m.group(1)) {
                case "cpu" -> DeviceKind.CPU;
                case "cuda" -> DeviceKind.CUDA;
                default -> throw new CommandLine.TypeConversionException("unknown device kind '" + m.group(1) + "' in '" + value + "': "
                    + EXPECTED);
            };
            long count = parseWhole(m.group(2));
            if (count < 1 || count > MAX_DEVICES) {
                throw new CommandLine.TypeConversionException(EXPECTED + ", got '" + value + "'");
            }
            return new DeviceSpec(kind, (int) count);
        }
    }

    /** Whole seconds, 1 to {@link #MAX_TIMEOUT_SECONDS}. */
    static final class TimeoutConverter implements CommandLine.ITypeConverter<Duration> {
        @Override
        public Duration convert(String value) {
            long seconds = parseWhole(value);
            if (seconds < 1 || seconds > MAX_TIMEOUT_SECONDS) {
                throw new CommandLine.TypeConversionException("expected a whole number of seconds from 1 to " + MAX_TIMEOUT_SECONDS
                    + " (a year), got '" + value + "'");
            }
            return Duration.ofSeconds(seconds);
        }
    }

    /** A count of syncs, 0 to {@link Integer#MAX_VALUE}. */
    static final class SyncsConverter implements CommandLine.ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            long syncs = parseWhole(value);
            if (syncs < 0 || syncs > Integer.MAX_VALUE) {
                throw new CommandLine.TypeConversionException("expected a whole number of syncs from 0 to " + Integer.MAX_VALUE
                    + ", got '" + value + "'");
            }
            return (int) syncs;
        }
    }

    /** A number of bytes, a whole number of at most 18 digits. */
    static final class BytesConverter implements CommandLine.ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            long bytes = parseWhole(value);
            if (bytes < 0) {
                throw new CommandLine.TypeConversionException("expected a whole number of bytes (at most 18 digits), got '" + value + "'");
            }
            return bytes;
        }
    }

    /** A {@code java.util.logging} level by name, in any case. */
    static final class LogLevelConverter implements CommandLine.ITypeConverter<Level> {
        private static final List<Level> LEVELS = List.of(Level.OFF, Level.SEVERE, Level.WARNING, Level.INFO, Level.CONFIG, Level.FINE,
            Level.FINER, Level.FINEST, Level.ALL);

        @Override
        public Level convert(String value) {
            for (Level level : LEVELS) {
                if (level.getName().equalsIgnoreCase(value)) {
                    return level;
                }
            }
            throw new CommandLine.TypeConversionException("expected one of off, severe, warning, info, config, fine, finer, finest, all, "
                + "got '" + value + "'");
        }
    }

    /** A whole number of at most 18 digits, or -1 (never a valid count or timeout). */
    static long parseWhole(String digits) {
        if (digits.isEmpty() || digits.length() > 18 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return -1;
        }
        return Long.parseLong(digits);
    }
}
