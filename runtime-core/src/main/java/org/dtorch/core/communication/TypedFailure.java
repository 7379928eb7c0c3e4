package org.dtorch.core.communication;

/**
 * An error that carries its {@link FailureKind}, named where the error was raised. {@link CommException} and its
 * subclasses, the runtime's operator failures and a dead worker's error implement it.
 *
 * <p>Thread-safe: implementations are immutable once thrown.
 */
public interface TypedFailure {

    /** What kind of failure this is. */
    FailureKind kind();
}
