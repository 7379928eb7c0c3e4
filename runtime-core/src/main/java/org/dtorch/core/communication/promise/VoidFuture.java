package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * The reading end of a one-shot "done" signal.
 *
 * <p>Thread-safe: any thread may wait, query or register callbacks.
 */
public interface VoidFuture {

    /**
     * The deadline of {@link #get()}: the one the promise was made with (a runtime's timeout, for the futures
     * a runtime returns), else the global communication timeout.
     */
    default Duration timeout() {
        return org.dtorch.core.communication.CommOptions.global().timeout();
    }

    /**
     * Blocks until done, up to {@link #timeout()}.
     *
     * @throws FutureFailedException if an error was set (the original is the cause)
     * @throws org.dtorch.core.communication.CommTimeoutException at the deadline
     */
    void get();

    /**
     * Blocks up to {@code timeout}; false if not done by then.
     *
     * @throws FutureFailedException if an error was set
     */
    boolean waitFor(Duration timeout);

    /** True only when done or failed. */
    boolean isReady();

    /**
     * A view for callbacks, completed when this future is, from a callback thread (never a device's worker
     * or the File-future watcher); completing it does not affect this one.
     */
    CompletableFuture<Void> toCompletableFuture();
}
