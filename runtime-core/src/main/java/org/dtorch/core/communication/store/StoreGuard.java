package org.dtorch.core.communication.store;

/**
 * The checks every {@link TensorStore} backend makes before it touches its state, in the same words in every
 * backend: whether this participant's instance is closed, and whether a key is usable. It holds the instance's closed
 * flag and the words that name the instance in errors ({@code store 'k' (rank 2)}, or, where the host matters,
 * {@code store 'k' (rank 2 on host 'h')}).
 *
 * <p>Messages: a call on a closed instance fails with {@code srcSet('a') on store 'k' (rank 2): the store is closed};
 * a null or empty key with {@code srcSet on store 'k' (rank 2): key must be a non-empty string, got null}. The closed
 * check comes first.
 *
 * <p>Thread-safe: any thread may check at any time; the flag is set once, by the first {@link #markClosed()}, and read
 * without a lock.
 */
final class StoreGuard {
    private final String who;
    private volatile boolean closed;

    /** A guard for the instance that errors call {@code who}. */
    StoreGuard(String who) {
        this.who = who;
    }

    /** A guard for the instance of {@code info}, named by its store key and rank. */
    static StoreGuard of(TensorStoreCreateInfo info) {
        return new StoreGuard("store '" + info.storeKey() + "' (rank " + info.rank() + ")");
    }

    /** The instance as errors name it. */
    String who() {
        return who;
    }

    /** {@code call} on this instance: {@code barrier() on store 'k' (rank 2)}. */
    String on(String call) {
        return call + " on " + who;
    }

    /** A keyed call on this instance: {@code destGet('a') on store 'k' (rank 2)}. */
    String describe(String method, String key) {
        return on(method + "('" + key + "')");
    }

    /** True once {@link #markClosed()} was called. */
    boolean isClosed() {
        return closed;
    }

    /** Marks the instance closed; true for the first call only, so that its caller releases what it holds once. */
    synchronized boolean markClosed() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }

    /** The failure of {@code op}, which names the call and the instance, because the instance is closed. */
    IllegalStateException closedError(String op) {
        return new IllegalStateException(op + ": the store is closed");
    }

    /** Refuses {@code op}, which names the call and the instance, once the instance is closed. */
    void ensureOpen(String op) {
        if (closed) {
            throw closedError(op);
        }
    }

    /** Refuses {@code method} of {@code key} when the instance is closed, then when the key is null or empty. */
    void checkKey(String key, String method) {
        ensureOpen(describe(method, key));
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException(on(method) + ": key must be a non-empty string, got " + (key == null ? "null" : "''"));
        }
    }
}
