package org.dtorch.core.runtime.process;

import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.TypedFailure;

/**
 * A control message that is malformed, truncated, of an unknown type or version, or that fails its
 * checksum. It is never executed; the channel it came from is no longer trusted.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class ProtocolException extends RuntimeException implements TypedFailure {

    /** A rejected message, and why. */
    public ProtocolException(String message) {
        super(message);
    }

    /** A rejected message, and the error that decoding it raised. */
    public ProtocolException(String message, Throwable cause) {
        super(message, cause);
    }

    @Override
    public FailureKind kind() {
        return FailureKind.PROTOCOL;
    }
}
