package org.dtorch.core.runtime.process;

/**
 * A control connection refused because the two ends do not hold the same {@link ClusterToken}: the peer's proof did
 * not match ours, or the peer refused ours. The message names the peer's address.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public final class WrongTokenException extends ProtocolException {

    /** A refused peer, and what it did. */
    public WrongTokenException(String message) {
        super(message);
    }
}
