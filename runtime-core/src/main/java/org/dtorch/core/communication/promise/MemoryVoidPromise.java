package org.dtorch.core.communication.promise;

import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A {@link VoidPromise} whose future lives in the same process.
 *
 * <p>Thread-safe: completion and {@link #getFuture()} are atomic.
 */
final class MemoryVoidPromise implements VoidPromise {
    private final CompletableFuture<Void> done = new CompletableFuture<>();
    private final AtomicBoolean futureTaken = new AtomicBoolean();

    @Override
    public void setValue() {
        if (!done.complete(null)) {
            throw new IllegalStateException("VoidPromise.setValue: the promise is already completed");
        }
    }

    @Override
    public void setException(Throwable e) {
        Objects.requireNonNull(e, "VoidPromise.setException: error is null");
        if (!done.completeExceptionally(e)) {
            throw new IllegalStateException("VoidPromise.setException: the promise is already completed", e);
        }
    }

    @Override
    public VoidFuture getFuture() {
        if (!futureTaken.compareAndSet(false, true)) {
            throw new IllegalStateException("VoidPromise.getFuture() was already called; a promise has exactly one future");
        }
        return new CompletableVoidFuture(done, "VoidFuture");
    }

    @Override
    public String serialize() {
        throw new UnsupportedOperationException(
            "a MEMORY promise lives in one process and cannot be serialized; use a FILE promise across processes");
    }

    @Override
    public TensorPromiseType type() {
        return TensorPromiseType.MEMORY;
    }
}
