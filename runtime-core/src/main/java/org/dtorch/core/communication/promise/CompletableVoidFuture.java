package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.dtorch.core.communication.CommOptions;

/**
 * A {@link VoidFuture} over a {@link CompletableFuture}; the memory backend and
 * {@link VoidFutureCollect} both read through it.
 *
 * <p>Thread-safe: the underlying future is.
 */
final class CompletableVoidFuture implements VoidFuture, DirectCompletion {
    private final CompletableFuture<Void> done;
    private final String what;
    /** Null for the global timeout at the time of the call. */
    private final Duration getTimeout;

    CompletableVoidFuture(CompletableFuture<Void> done, String what, Duration getTimeout) {
        this.done = done;
        this.what = what;
        this.getTimeout = getTimeout;
    }

    @Override
    public Duration timeout() {
        return CompletionWait.ownOrGlobal(getTimeout);
    }

    @Override
    public CompletableFuture<?> directCompletion() {
        return done;
    }

    @Override
    public void get() {
        CompletionWait.awaitOrThrow(done, timeout(), what + ".get()", "no value or error was set");
        rethrowFailure();
    }

    @Override
    public boolean waitFor(Duration timeout) {
        CommOptions.validateTimeout(timeout);
        if (!CompletionWait.awaitDone(done, timeout.toNanos(), what + ".waitFor()")) {
            return false;
        }
        rethrowFailure();
        return true;
    }

    @Override
    public boolean isReady() {
        return done.isDone();
    }

    @Override
    public CompletableFuture<Void> toCompletableFuture() {
        return FutureCallbacks.offCompleter(done);
    }

    private void rethrowFailure() {
        try {
            done.join();
        } catch (CompletionException e) {
            throw new FutureFailedException(what, e.getCause());
        }
    }
}
