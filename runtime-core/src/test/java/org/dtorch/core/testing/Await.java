package org.dtorch.core.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * Waits in tests for the condition a test depends on, instead of sleeping for a time that is usually long enough: the
 * wait ends as soon as the condition holds, and fails at its deadline with an {@link AssertionError} that says what was
 * awaited. A loaded machine then makes a test slower, never wrong.
 *
 * <p>The condition is polled: a few spins, then parks that grow from 0.1 ms to 10 ms, so a condition that
 * comes quickly is seen quickly and a long wait costs little CPU.
 *
 * <p>Thread-safe: stateless; the condition is called from the waiting thread only.
 */
public final class Await {
    /** Thread states in which a thread waits for something rather than runs. */
    private static final Set<Thread.State> PARKED = EnumSet.of(Thread.State.WAITING, Thread.State.TIMED_WAITING, Thread.State.BLOCKED);
    private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final long MIN_KERNEL_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

    private Await() {
    }

    /**
     * Returns once {@code condition} holds; fails with "timed out after {@code timeout} waiting until
     * {@code description}" if it does not hold by then.
     */
    public static void until(BooleanSupplier condition, Duration timeout, String description) {
        until(condition, timeout, () -> description);
    }

    /** {@link #until(BooleanSupplier, Duration, String)} with a description made at the deadline, from what is seen then. */
    public static void until(BooleanSupplier condition, Duration timeout, Supplier<String> description) {
        long deadline = System.nanoTime() + timeout.toNanos();
        long park = 100_000;
        for (int attempt = 0; !condition.getAsBoolean(); attempt++) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout + " waiting until " + description.get());
            }
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting until " + description.get());
            }
            if (attempt < 10) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, MAX_PARK_NANOS);
            }
        }
    }

    /**
     * Returns once {@code thread} waits (it is {@code WAITING}, {@code TIMED_WAITING} or {@code BLOCKED}): it has reached a
     * lock, a park, a sleep or a monitor and stays there until something wakes it. A thread inside native code reads as
     * {@code RUNNABLE}, so a wait inside a native library needs a condition of its own. Fails if the thread ends first.
     */
    public static void parked(Thread thread, Duration timeout) {
        until(() -> {
            Thread.State state = thread.getState();
            if (state == Thread.State.TERMINATED) {
                throw new AssertionError(thread.getName() + " ended while the test waited for it to block");
            }
            return PARKED.contains(state);
        }, timeout, () -> thread.getName() + " waits (it is " + thread.getState() + ")");
    }

    /** {@link #parked(Thread, Duration)} with a deadline of 30 s. */
    public static void parked(Thread thread) {
        parked(thread, Duration.ofSeconds(30));
    }

    /**
     * Returns once {@code thread} waits, either {@linkplain #parked parked} in Java or asleep in the kernel inside native
     * code (a futex, a socket, a native library's condition variable): Java reports the latter as {@code RUNNABLE}, so this
     * also reads the state of its kernel task ({@code /proc/self/task/<tid>/stat}), found by the thread's name. That name
     * must be unique among this process's Java threads within its first 15 characters, the length of a kernel task name. The kernel sleep
     * must last 2 ms on consecutive reads, so that a brief stop on the way (a page fault, a safepoint) does not count.
     */
    public static void asleep(Thread thread, Duration timeout) {
        long tid = taskOf(thread, timeout);
        Path stat = Path.of("/proc/self/task/" + tid + "/stat");
        long[] asleepSince = {0};
        until(() -> {
            Thread.State state = thread.getState();
            if (PARKED.contains(state)) {
                return true;
            }
            char task = taskState(stat, thread);
            if (state != Thread.State.RUNNABLE || task != 'S') {
                asleepSince[0] = 0;
                return false;
            }
            long now = System.nanoTime();
            if (asleepSince[0] == 0) {
                asleepSince[0] = now;
            }
            return now - asleepSince[0] >= MIN_KERNEL_SLEEP_NANOS;
        }, timeout, () -> thread.getName() + " (task " + tid + ") waits (it is " + thread.getState() + ", its task "
            + taskState(stat, thread) + ")");
    }

    /** {@link #asleep(Thread, Duration)} with a deadline of 30 s. */
    public static void asleep(Thread thread) {
        asleep(thread, Duration.ofSeconds(30));
    }

    /**
     * The kernel task id of {@code thread}, found by its name once the thread has started and named its task. A thread
     * that native code starts (a library's worker pool) takes the name of the thread that started it: of the tasks with
     * the name, the thread is the one that started first.
     */
    private static long taskOf(Thread thread, Duration timeout) {
        byte[] full = thread.getName().getBytes(StandardCharsets.UTF_8);
        String name = new String(full, 0, Math.min(full.length, 15), StandardCharsets.UTF_8);
        long[] found = {0, Long.MAX_VALUE};
        until(() -> {
            found[0] = 0;
            found[1] = Long.MAX_VALUE;
            try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
                tasks.forEach(task -> {
                    try {
                        if (Files.readString(task.resolve("comm")).strip().equals(name)) {
                            String stat = Files.readString(task.resolve("stat"));
                            // Field 22, the start time, counted from the fields after the name in parentheses (field 2).
                            long started = Long.parseLong(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[19]);
                            if (started < found[1]) {
                                found[0] = Long.parseLong(task.getFileName().toString());
                                found[1] = started;
                            }
                        }
                    } catch (IOException ended) {
                        // that task ended while we listed the others
                    }
                });
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return found[0] != 0;
        }, timeout, () -> "a kernel task is named '" + name + "'");
        return found[0];
    }

    private static char taskState(Path stat, Thread thread) {
        try {
            String text = Files.readString(stat);
            return text.charAt(text.lastIndexOf(')') + 2);
        } catch (IOException e) {
            throw new AssertionError(thread.getName() + " ended while the test waited for it to sleep in native code", e);
        }
    }
}
