package org.dtorch.core.communication;

import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.dtorch.core.shm.Processes;

/**
 * Names one runtime instance, so that two runtimes on one host never share a file, shared-memory
 * object or rendezvous path by accident (DTorch's {@code GlobalCommInstanceId}).
 *
 * <p>DTorch uses the process id; several runtimes can live in one JVM here, so an id is the process
 * id with the process's start time (clock ticks since boot, base 36), a random nonce fixed for the JVM, and
 * a counter: {@code p4711.8k2d1-k3f9a-2}. The processes of one runtime share its id: the controller passes
 * it to workers, which set {@value #PROPERTY}. Pid and start time together name the creating process even
 * after the system gave its pid to another one, so {@link org.dtorch.core.shm.ShmJanitor} can tell a dead
 * creator from a live one ({@link #creatorOf}).
 *
 * <p>Thread-safe: any thread may call any method.
 */
public final class GlobalCommInstanceId {
    /** System property that fixes the id prefix of this process (set by a controller for its workers). */
    public static final String PROPERTY = "dtorch.comm.instanceId";

    private static final String PROCESS_PREFIX = computePrefix();
    private static final AtomicLong COUNTER = new AtomicLong();

    private GlobalCommInstanceId() {
    }

    /** The id prefix of this process, fixed for the JVM: {@value #PROPERTY} if set, else pid and a nonce. */
    public static String processPrefix() {
        return PROCESS_PREFIX;
    }

    private static String computePrefix() {
        String fixed = System.getProperty(PROPERTY);
        if (fixed != null && !fixed.isBlank()) {
            return sanitize(fixed);
        }
        String nonce = Long.toString(ThreadLocalRandom.current().nextLong(36L * 36 * 36 * 36, 36L * 36 * 36 * 36 * 36), 36);
        long start = Processes.currentStartTicks();
        return "p" + Processes.currentPid() + (start >= 0 ? "." + Long.toString(start, 36) : "") + "-" + nonce;
    }

    /** The process that created a runtime instance: its pid, and its start time or -1 where the id has none. */
    public record Creator(int pid, long startTicks) {
    }

    /**
     * The creator named by {@code name}, an instance id or a file name that starts with one after
     * {@code prefix}: {@code <prefix>p<pid>[.<start>]-...}. Empty if the name has no such form (an id fixed
     * through {@value #PROPERTY}, for instance).
     */
    public static Optional<Creator> creatorOf(String name, String prefix) {
        if (!name.startsWith(prefix + "p")) {
            return Optional.empty();
        }
        int from = prefix.length() + 1;
        int dash = name.indexOf('-', from);
        if (dash <= from) {
            return Optional.empty();
        }
        String creator = name.substring(from, dash);
        int dot = creator.indexOf('.');
        try {
            int pid = Integer.parseInt(dot < 0 ? creator : creator.substring(0, dot));
            long start = dot < 0 ? -1 : Long.parseLong(creator.substring(dot + 1), 36);
            return pid > 0 && (dot < 0 || start >= 0) ? Optional.of(new Creator(pid, start)) : Optional.empty();
        } catch (NumberFormatException e) {
            return Optional.empty();
        }
    }

    /** A new instance id, unique on this host: the process prefix and a per-process counter. */
    public static String next() {
        return PROCESS_PREFIX + "-" + COUNTER.incrementAndGet();
    }

    /** Replaces characters that do not belong in a file name with {@code _}. */
    public static String sanitize(String name) {
        return name.replaceAll("[^A-Za-z0-9._-]", "_");
    }
}
