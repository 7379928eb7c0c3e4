package org.dtorch.core.runtime.process;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.CompletableFuture;

/**
 * A worker process that is a child of this JVM: its exit comes from the JVM's process reaper (within milliseconds of a
 * SIGKILL), and its output is forwarded to this process's standard error, each line prefixed with {@code label}; the
 * last {@value #OUTPUT_TAIL} lines are kept for error messages.
 *
 * <p>Thread-safe.
 */
final class LocalWorkerLife implements WorkerLife {
    /** Lines of output kept for error messages. */
    static final int OUTPUT_TAIL = 40;

    private final Process process;
    private final String label;
    private final Deque<String> tail = new ArrayDeque<>();
    private final CompletableFuture<Integer> exit;

    /** Starts forwarding {@code process}'s output (its standard error merged into it) under {@code label}. */
    LocalWorkerLife(Process process, String label) {
        this.process = process;
        this.label = label;
        this.exit = process.onExit().thenApply(Process::exitValue);
        Thread.ofPlatform().daemon().name("dtorch-worker-output-" + label).start(this::pumpOutput);
    }

    @Override
    public long pid() {
        return process.pid();
    }

    @Override
    public boolean isAlive() {
        return process.isAlive();
    }

    @Override
    public int exitStatusNow() {
        return process.isAlive() ? -1 : process.exitValue();
    }

    @Override
    public CompletableFuture<Integer> onExit() {
        return exit;
    }

    @Override
    public void destroy() {
        process.destroyForcibly();
    }

    @Override
    public String outputTail() {
        synchronized (tail) {
            return String.join("\n", tail);
        }
    }

    private void pumpOutput() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null; ) {
                synchronized (tail) {
                    tail.addLast(line);
                    if (tail.size() > OUTPUT_TAIL) {
                        tail.removeFirst();
                    }
                }
                System.err.println("[dtorch " + label + "] " + line);
            }
        } catch (IOException ignored) {
            // the process is gone
        }
    }
}
