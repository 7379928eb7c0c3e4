package org.dtorch.core.communication;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Names one runtime instance, so that two runtimes on one host never share a file, shared-memory
 * object or rendezvous path by accident (the seed's {@code GlobalCommInstanceId}).
 *
 * <p>The seed uses the process id; several runtimes can live in one JVM here, so an id is the process
 * id, a random nonce fixed for the JVM, and a counter: {@code p4711-k3f9a-2}. The processes of one
 * runtime share its id: the controller passes it to workers, which set {@value #PROPERTY}.
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
        return "p" + ProcessHandle.current().pid() + "-" + nonce;
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
