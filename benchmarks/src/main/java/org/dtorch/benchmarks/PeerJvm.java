package org.dtorch.benchmarks;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.dtorch.core.runtime.process.JvmCommand;

/**
 * A {@link ProcessBenchPeer} JVM started by {@link ProcessBenchmark} ({@code <mode> <instance> <key> <n> <blocks>}),
 * or a JVM of another peer main class ({@link CudaIpcBenchPeer}), and its stdout, read for {@code READY}-style lines
 * and samples. Reading a line has a deadline, and the peer is killed if it does not exit in time.
 *
 * <p>Not thread-safe: the harness thread drives it.
 */
final class PeerJvm implements AutoCloseable {
    /** How long the peer may take to start, print a line, or exit. */
    private static final long TIMEOUT_SECONDS = 300;

    private final String mode;
    private final Process process;
    private final BufferedReader out;
    private final BufferedWriter in;

    private PeerJvm(String mode, Process process) {
        this.mode = mode;
        this.process = process;
        this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        this.in = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
    }

    static PeerJvm start(String mode, String instance, String key, int n, int blocks) throws IOException {
        return start(ProcessBenchPeer.class, mode, List.of(mode, instance, key, String.valueOf(n), String.valueOf(blocks)));
    }

    /** A JVM running {@code mainClass} with {@code args}; {@code mode} names it in errors. */
    static PeerJvm start(Class<?> mainClass, String mode, List<String> args) throws IOException {
        return start(mainClass, mode, args, Map.of());
    }

    /** A JVM running {@code mainClass} with {@code args} and the system properties {@code properties}. */
    static PeerJvm start(Class<?> mainClass, String mode, List<String> args, Map<String, String> properties) throws IOException {
        ProcessBuilder builder = JvmCommand.of(mainClass.getName(), args, properties, List.of("-Xmx2g")).processBuilder();
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        return new PeerJvm(mode, builder.start());
    }

    /** Writes {@code line} to the peer's standard input (the harnesses whose peers take commands). */
    void send(String line) throws IOException {
        in.write(line);
        in.newLine();
        in.flush();
    }

    /** The rest of the peer's next line starting with {@code prefix}, trimmed. */
    String valueOf(String prefix) throws IOException {
        String line = readLine(prefix);
        if (line == null) {
            throw new IllegalStateException("the " + mode + " peer exited (status " + exitStatus() + ") before printing " + prefix);
        }
        return line.substring(prefix.length()).trim();
    }

    void awaitLine(String expected) throws IOException {
        if (readLine(expected) == null) {
            throw new IllegalStateException("the " + mode + " peer exited (status " + exitStatus() + ") before printing " + expected);
        }
    }

    /** The peer's next {@code SAMPLES} line. */
    Samples samples(String name) throws IOException {
        String line = readLine("SAMPLES");
        if (line == null) {
            throw new IllegalStateException("the " + mode + " peer exited (status " + exitStatus() + ") before printing its samples");
        }
        Samples samples = new Samples(name);
        for (String part : line.substring("SAMPLES".length()).trim().split(" ")) {
            samples.add(Long.parseLong(part));
        }
        return samples;
    }

    /** The first line starting with {@code prefix}, or null at the end of the output; fails after the deadline. */
    private String readLine(String prefix) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
        while (true) {
            while (!out.ready() && process.isAlive()) {
                if (System.nanoTime() > deadline) {
                    process.destroyForcibly();
                    throw new IllegalStateException("the " + mode + " peer printed no '" + prefix + "' line within "
                        + TIMEOUT_SECONDS + " s; killed it");
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            String line = out.readLine();
            if (line == null || line.startsWith(prefix)) {
                return line;
            }
        }
    }

    private String exitStatus() {
        return process.isAlive() ? "still running" : String.valueOf(process.exitValue());
    }

    @Override
    public void close() throws Exception {
        in.close(); // the end of its input ends a peer that takes commands
        if (!process.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException("the " + mode + " peer did not exit within " + TIMEOUT_SECONDS + " s; killed it");
        }
    }
}
