package org.dtorch.core.communication;

/**
 * A communication operation failed: a peer reported an error, a backend failed, or the wait was cut short.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class CommException extends RuntimeException {

    /** An exception with a message that names the operation and what it saw. */
    public CommException(String message) {
        super(message);
    }

    /** An exception with a message and the underlying cause. */
    public CommException(String message, Throwable cause) {
        super(message, cause);
    }
}
