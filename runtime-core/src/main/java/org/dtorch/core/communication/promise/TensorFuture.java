package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.pytorch.Tensor;

/**
 * The reading end of a one-shot tensor hand-off (docs/communication-core.md, Promises and futures).
 *
 * <p>Every returned tensor is a new reference that the caller owns.
 *
 * <p>Thread-safe: any thread may wait, query or register callbacks.
 */
public interface TensorFuture {

    /**
     * The deadline of {@link #get()}: the one the promise was made with (a runtime's timeout, for the futures
     * a runtime returns), else the global communication timeout.
     */
    default Duration timeout() {
        return org.dtorch.core.communication.CommOptions.global().timeout();
    }

    /**
     * Blocks until the value or an error is present, up to {@link #timeout()}.
     *
     * @throws FutureFailedException  if the promise was completed with an error (the original is the cause)
     * @throws org.dtorch.core.communication.CommTimeoutException at the deadline
     * @throws org.dtorch.core.communication.CommInterruptedException if the thread is interrupted
     */
    Tensor get();

    /**
     * Blocks up to {@code timeout}; empty if nothing arrived by then (DTorch's {@code Wait}).
     *
     * @throws FutureFailedException if the promise was completed with an error
     */
    Optional<Tensor> waitFor(Duration timeout);

    /** True only when a value or an error is present (not merely when a promise exists). */
    boolean isReady();

    /**
     * A view for callbacks and composition, completed when this future is, from a callback thread: stages
     * attached to it never run on a device's worker thread or on the process's File-future watcher, so a
     * callback may block (on another value, say) without stalling the runtime. Completing the returned
     * future does not affect this one. Its values are references owned by the future: close none of
     * them, and take a {@code new Tensor(value)} to keep one.
     */
    CompletableFuture<Tensor> toCompletableFuture();
}
