package org.dtorch.core.runtime.process;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * The command line that starts another JVM running a main class on this JVM's class path, with the
 * options the runtime needs there: native access for the FFM API and JavaCPP, JavaCPP's memory
 * accounting off (libtorch owns tensor memory), and the {@code dtorch.*}, {@code org.bytedeco.*} and
 * {@code java.io.tmpdir} system properties of this JVM, so the child sees the same configuration.
 *
 * <p>Extra JVM options come from {@value #JVM_ARGS_PROPERTY} (space-separated), then from the caller.
 *
 * <p>Thread-safe: immutable.
 */
public final class JvmCommand {
    /** System property: extra options for every child JVM, separated by spaces. */
    public static final String JVM_ARGS_PROPERTY = "dtorch.worker.jvmArgs";

    private static final List<String> BASE_OPTIONS = List.of("--enable-native-access=ALL-UNNAMED",
        "--sun-misc-unsafe-memory-access=allow", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
        "-XX:+UseSerialGC", "-Xss4m");
    private static final List<String> INHERITED_PREFIXES = List.of("dtorch.", "org.bytedeco.");

    private final List<String> command;

    private JvmCommand(List<String> command) {
        this.command = List.copyOf(command);
    }

    /**
     * {@code java [options] -cp <this class path> mainClass args...}.
     *
     * @param systemProperties properties to set in the child, over the inherited ones
     * @param jvmOptions       further options, such as {@code -Xmx1g}
     */
    public static JvmCommand of(String mainClass, List<String> args, Map<String, String> systemProperties, List<String> jvmOptions) {
        Objects.requireNonNull(mainClass, "mainClass");
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(BASE_OPTIONS);
        for (String name : System.getProperties().stringPropertyNames()) {
            if ((INHERITED_PREFIXES.stream().anyMatch(name::startsWith) || name.equals("java.io.tmpdir"))
                && !systemProperties.containsKey(name) && !name.equals(JVM_ARGS_PROPERTY)) {
                cmd.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        systemProperties.forEach((k, v) -> cmd.add("-D" + k + "=" + v));
        String extra = System.getProperty(JVM_ARGS_PROPERTY, "").trim();
        if (!extra.isEmpty()) {
            cmd.addAll(List.of(extra.split("\\s+")));
        }
        cmd.addAll(jvmOptions);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(mainClass);
        cmd.addAll(args);
        return new JvmCommand(cmd);
    }

    /** This command with {@code arguments} after its own. */
    JvmCommand plus(List<String> arguments) {
        List<String> longer = new ArrayList<>(command);
        longer.addAll(arguments);
        return new JvmCommand(longer);
    }

    /** The command and its arguments. */
    public List<String> command() {
        return command;
    }

    /**
     * How a command run by {@link #runToCompletion} ended.
     *
     * @param finished   false if it was killed at the deadline
     * @param exitStatus its exit status, or -1 if it did not finish
     * @param output     everything it printed, standard output and standard error together
     */
    public record Outcome(boolean finished, int exitStatus, String output) {
    }

    /**
     * Runs the command in {@code directory} (null for this process's) and waits for its end, at most
     * {@code deadline}, killing it then. For tests and harnesses that need a JVM of their own.
     */
    public Outcome runToCompletion(Path directory, Duration deadline) throws IOException, InterruptedException {
        ProcessBuilder builder = processBuilder().redirectErrorStream(true);
        if (directory != null) {
            builder.directory(directory.toFile());
        }
        Process process = builder.start();
        ByteArrayOutputStream output = new ByteArrayOutputStream();
        Thread pump = Thread.ofPlatform().daemon().name("child-jvm-output").start(() -> {
            try (InputStream in = process.getInputStream()) {
                in.transferTo(output);
            } catch (IOException ignored) {
                // the child is gone
            }
        });
        try {
            boolean finished = process.waitFor(deadline.toMillis(), TimeUnit.MILLISECONDS);
            if (!finished) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            pump.join(10_000);
            return new Outcome(finished, finished ? process.exitValue() : -1, output.toString(StandardCharsets.UTF_8));
        } finally {
            process.destroyForcibly();
        }
    }

    /** A process builder for the command; the caller decides what happens to its output. */
    public ProcessBuilder processBuilder() {
        ProcessBuilder builder = new ProcessBuilder(command);
        Map<String, String> env = builder.environment();
        env.putIfAbsent("THP_MEM_ALLOC_ENABLE", "1");
        // glibc's heap settings of ./dtorch (docs/configuration.md): a worker's thread keeps the heap memory it freed
        // instead of mapping it again, page by page, at the CUDA driver's next allocations.
        env.putIfAbsent("MALLOC_TRIM_THRESHOLD_", "4294967296");
        env.putIfAbsent("MALLOC_TOP_PAD_", "67108864");
        env.putIfAbsent("MALLOC_MMAP_THRESHOLD_", "33554432");
        return builder;
    }
}
