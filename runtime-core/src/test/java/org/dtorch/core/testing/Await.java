package org.dtorch.core.testing;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.JMException;
import javax.management.ObjectName;

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
     * lock, a park, a sleep or a monitor and stays there until something wakes it. A thread waiting inside native code
     * reads as {@code RUNNABLE}: {@link #asleep} sees it. Fails if the thread ends first.
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
     * also reads the state of its kernel task ({@code /proc/self/task/<tid>/stat}). The kernel sleep must last 2 ms on
     * consecutive reads, so that a brief stop on the way (a page fault, a safepoint) does not count.
     */
    public static void asleep(Thread thread, Duration timeout) {
        long tid = taskOf(thread);
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
     * The kernel task id of {@code thread}, from the JVM's thread dump, which gives each Java thread's id with its native
     * one: thread names are no key, native code that a thread starts carries its name too.
     */
    private static long taskOf(Thread thread) {
        String dump;
        try {
            ObjectName commands = new ObjectName("com.sun.management:type=DiagnosticCommand");
            dump = (String) ManagementFactory.getPlatformMBeanServer().invoke(commands, "threadPrint", new Object[] {new String[0]},
                new String[] {String[].class.getName()});
        } catch (JMException e) {
            throw new AssertionError("cannot read this JVM's thread dump", e);
        }
        Matcher line = Pattern.compile("\" #" + thread.threadId() + " \\[(\\d+)\\]").matcher(dump);
        if (!line.find()) {
            throw new AssertionError(thread.getName() + " (#" + thread.threadId() + ") is not in the thread dump: it has not started or has"
                + " ended");
        }
        return Long.parseLong(line.group(1));
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
