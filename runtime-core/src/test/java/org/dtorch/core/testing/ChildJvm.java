package org.dtorch.core.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.runtime.process.JvmCommand;

/**
 * A child JVM running a test main class on the test class path, its stdout and stderr collected line by
 * line. Tests wait for lines the child prints ({@code READY}, results) and for its exit, always with a
 * deadline; {@link #close()} kills what is still running.
 */
public final class ChildJvm implements AutoCloseable {
    private final String label;
    private final Process process;
    private final List<String> lines = new ArrayList<>();
    private final Thread pump;

    private ChildJvm(String label, Process process) {
        this.label = label;
        this.process = process;
        this.pump = Thread.ofPlatform().daemon().name("child-output-" + label).start(this::pumpOutput);
    }

    /** Starts {@code mainClass args...} with the given system properties. */
    public static ChildJvm start(String label, Class<?> mainClass, Map<String, String> properties, String... args) {
        ProcessBuilder builder = JvmCommand.of(mainClass.getName(), Arrays.asList(args), properties, List.of("-Xmx512m")).processBuilder();
        builder.redirectErrorStream(true);
        try {
            return new ChildJvm(label, builder.start());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start child JVM " + label, e);
        }
    }

    private void pumpOutput() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null; ) {
                synchronized (lines) {
                    lines.add(line);
                    lines.notifyAll();
                }
            }
        } catch (IOException ignored) {
            // the child is gone
        }
    }

    /** The child's process id. */
    public long pid() {
        return process.pid();
    }

    /** Waits for a line starting with {@code prefix} and returns it. */
    public String awaitLine(String prefix, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (lines) {
            int seen = 0;
            while (true) {
                for (; seen < lines.size(); seen++) {
                    if (lines.get(seen).startsWith(prefix)) {
                        return lines.get(seen);
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError(label + ": no line starting with '" + prefix + "' within " + timeout + "; output:\n" + output());
                }
                if (!process.isAlive() && !pump.isAlive()) {
                    throw new AssertionError(label + " exited with " + process.exitValue() + " before printing '" + prefix + "'; output:\n"
                        + output());
                }
                try {
                    lines.wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 100)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
        }
    }

    /** Writes {@code line} to the child's standard input, where {@link ChildMain#awaitParent} reads it. */
    public void send(String line) {
        try {
            OutputStream in = process.getOutputStream();
            in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            in.flush();
        } catch (IOException e) {
            throw new AssertionError(label + " no longer reads its input; output:\n" + output(), e);
        }
    }

    /** Waits for the child to exit; its exit code. */
    public int awaitExit(Duration timeout) {
        try {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError(label + " did not exit within " + timeout + "; output:\n" + output());
            }
            pump.join(5000);
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Waits for a clean exit (status 0), failing with the child's output otherwise. */
    public void awaitSuccess(Duration timeout) {
        int status = awaitExit(timeout);
        if (status != 0) {
            throw new AssertionError(label + " exited with " + status + "; output:\n" + output());
        }
    }

    /** Sends SIGKILL and waits for the process to be gone. */
    public void kill9() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Everything the child printed so far. */
    public String output() {
        synchronized (lines) {
            return String.join("\n", lines);
        }
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            kill9();
        }
    }
}
