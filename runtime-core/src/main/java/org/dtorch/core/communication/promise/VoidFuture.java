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
     * Blocks until done, up to the global communication timeout.
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

    /** A view for callbacks, completed when this future is; completing it does not affect this one. */
    CompletableFuture<Void> toCompletableFuture();
}
