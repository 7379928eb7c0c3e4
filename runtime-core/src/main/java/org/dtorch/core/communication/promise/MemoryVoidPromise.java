package org.dtorch.core.communication.promise;

import java.time.Duration;

/**
 * A {@link VoidPromise} whose future lives in the same process.
 *
 * <p>Thread-safe: completion and {@link #getFuture()} are atomic.
 */
final class MemoryVoidPromise extends MemoryPromise<Void> implements VoidPromise {

    MemoryVoidPromise(Duration getTimeout) {
        super("VoidPromise", getTimeout);
    }

    @Override
    public void setValue() {
        if (!completeWith(null)) {
            throw alreadyCompleted("setValue");
        }
    }

    @Override
    public VoidFuture getFuture() {
        takeFuture();
        return new CompletableVoidFuture(completion, "VoidFuture", getTimeout);
    }
}
