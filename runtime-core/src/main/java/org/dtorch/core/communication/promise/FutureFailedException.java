package org.dtorch.core.communication.promise;

import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.FailureKind;

/**
 * Thrown by a future's {@code get} or {@code waitFor} when its promise was completed with
 * {@code setException}; the original error is the cause and its message is repeated.
 *
 * Its kind is the kind of the error set on the promise.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class FutureFailedException extends CommException {

    /** Wraps the error set on the promise. */
    public FutureFailedException(String what, Throwable cause) {
        super(FailureKind.of(cause), what + " failed: " + cause, cause);
    }
}
