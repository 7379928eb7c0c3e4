package org.dtorch.core.communication.promise;

import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.FailureKind;

/**
 * An error raised in another process and carried here as text: the original exception's class and
 * message, and those of its causes, with the {@link FailureKind} it had there. The cause of a
 * {@link FutureFailedException} whose promise was completed in another process.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class RemoteFailureException extends CommException {

    /** An error described by {@code text}, of a kind that did not travel with it ({@link FailureKind#UNKNOWN}). */
    public RemoteFailureException(String text) {
        this(FailureKind.UNKNOWN, text);
    }

    /** An error described by {@code text} that was of {@code kind} where it happened. */
    public RemoteFailureException(FailureKind kind, String text) {
        super(kind, text, null);
    }

    /** The text that stands for {@code error} in another process: class and message of it and its causes. */
    public static String describe(Throwable error) {
        StringBuilder text = new StringBuilder(String.valueOf(error));
        Throwable cause = error.getCause();
        for (int depth = 0; cause != null && cause != error && depth < 8; depth++, cause = cause.getCause()) {
            String line = String.valueOf(cause);
            if (text.indexOf(line) < 0) {
                text.append("\n  caused by ").append(line);
            }
        }
        return text.toString();
    }
}
