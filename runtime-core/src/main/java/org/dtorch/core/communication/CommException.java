package org.dtorch.core.communication;

/**
 * A communication operation failed: a peer reported an error, a backend failed, or the wait was cut short.
 * Its {@link FailureKind} is {@link FailureKind#COMMUNICATION} unless the code that raised it named another
 * (subclasses for timeouts and interruptions do; a cancellation passes {@link FailureKind#CANCELLED}).
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class CommException extends RuntimeException implements TypedFailure {
    private final FailureKind kind;

    /** An exception with a message that names the operation and what it saw. */
    public CommException(String message) {
        this(FailureKind.COMMUNICATION, message, null);
    }

    /** An exception with a message and the underlying cause. */
    public CommException(String message, Throwable cause) {
        this(FailureKind.COMMUNICATION, message, cause);
    }

    /** An exception of a kind the raiser names (a cancellation, a protocol error), with an optional cause. */
    public CommException(FailureKind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = java.util.Objects.requireNonNull(kind, "kind");
    }

    @Override
    public FailureKind kind() {
        return kind;
    }
}
