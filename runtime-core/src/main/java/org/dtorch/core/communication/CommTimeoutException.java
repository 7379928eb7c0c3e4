package org.dtorch.core.communication;

/**
 * A blocking communication call reached its deadline. The message names the operation, the store,
 * group or future it waited on, the key, and what it had seen so far, for example
 * {@code destGet('3') on store 'g7/op12' timed out after 30 s: no producer set this key}.
 *
 * Its kind is {@link FailureKind#TIMEOUT}.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class CommTimeoutException extends CommException {

    /** A timeout with its full message. */
    public CommTimeoutException(String message) {
        super(FailureKind.TIMEOUT, message, null);
    }

    /** A timeout reported by a backend, kept as the cause. */
    public CommTimeoutException(String message, Throwable cause) {
        super(FailureKind.TIMEOUT, message, cause);
    }
}
