package org.dtorch.core.communication;

/**
 * The thread was interrupted while blocked in a communication call. The call left the shared state as
 * it was before the call (nothing was taken or counted), and the thread's interrupt flag is set again.
 *
 * Its kind is {@link FailureKind#CANCELLED}: threads are interrupted to cancel their waits.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class CommInterruptedException extends CommException {

    /** An interruption of the named operation. */
    public CommInterruptedException(String message, InterruptedException cause) {
        super(FailureKind.CANCELLED, message, cause);
    }
}
