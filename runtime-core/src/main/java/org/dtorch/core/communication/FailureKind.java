package org.dtorch.core.communication;

/**
 * What kind of failure an error is, recorded where it happens: the code that catches a native c10d error, a
 * kernel's exception, a deadline or a dead worker process names the kind once, and everybody downstream
 * decides on it instead of reading words in a message, which are for people.
 *
 * <p>{@link #of(Throwable)} finds the kind of an error: the first {@link TypedFailure} on its cause chain, or
 * {@link #UNKNOWN}.
 *
 * <p>Thread-safe: an enum.
 */
public enum FailureKind {
    /** A collective, store or connection between devices broke (a peer may have died). */
    COMMUNICATION,
    /** A blocking call reached its deadline. */
    TIMEOUT,
    /** An operator's kernel threw on a device (bad input, out of memory, a bug in the kernel). */
    KERNEL,
    /** The worker process of a device exited while the runtime was running. */
    WORKER_DIED,
    /** The work was cancelled (the runtime is closing, or a wait was interrupted) before it finished. */
    CANCELLED,
    /** A control message between the controller and a worker was malformed. */
    PROTOCOL,
    /** Nobody recorded a kind: an error that did not pass through a place that knows. */
    UNKNOWN;

    /** The kind recorded on {@code error} or the nearest cause that carries one; {@link #UNKNOWN} if none does. */
    public static FailureKind of(Throwable error) {
        int depth = 0;
        for (Throwable t = error; t != null && depth < 16; t = t.getCause() == t ? null : t.getCause(), depth++) {
            if (t instanceof TypedFailure typed) {
                return typed.kind();
            }
        }
        return UNKNOWN;
    }

    /**
     * True for a failure that a peer's death often shows up as first (a broken connection or store): the runtime
     * waits a moment for news of a dead worker before it reports one of these, so that the error names the death. A
     * timeout is not one: a death is noticed long before any deadline.
     */
    public boolean mayHideADeadPeer() {
        return this == COMMUNICATION;
    }

    /** The kind with {@code ordinal}, as written on the wire or in shared memory; {@link #UNKNOWN} if out of range. */
    public static FailureKind fromOrdinal(int ordinal) {
        FailureKind[] all = values();
        return ordinal >= 0 && ordinal < all.length ? all[ordinal] : UNKNOWN;
    }
}
