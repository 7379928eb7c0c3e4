package org.dtorch.core.communication.promise;

import java.time.Duration;
import org.dtorch.core.communication.CommOptions;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.dtorch.core.trace.Tracer;

/**
 * What the in-process promises share: a {@link CompletableFuture} completed exactly once, a future that
 * can be taken exactly once, and no serialization.
 *
 * <p>Thread-safe: completion and taking the future are atomic.
 *
 * @param <T> the value type
 */
abstract class MemoryPromise<T> {
    final CompletableFuture<T> completion = new CompletableFuture<>();
    private final AtomicBoolean futureTaken = new AtomicBoolean();
    private final String name;
    /** The default deadline of the future's {@code get()}; null for the global timeout at the time of the call. */
    final Duration getTimeout;

    MemoryPromise(String name, Duration getTimeout) {
        this.name = name;
        this.getTimeout = getTimeout == null ? null : CommOptions.validateTimeout(getTimeout);
    }

    /** Completes with {@code value}; false if already completed. */
    final boolean completeWith(T value) {
        Tracer.promiseCompleted(name);
        return completion.complete(value);
    }

    /** {@code setException}: completes with an error, or throws if already completed. */
    public final void setException(Throwable e) {
        Objects.requireNonNull(e, name + ".setException: error is null");
        if (!completion.completeExceptionally(e)) {
            throw new IllegalStateException(name + ".setException: the promise is already completed", e);
        }
    }

    /** Marks the future as taken; the second call throws. */
    final void takeFuture() {
        if (!futureTaken.compareAndSet(false, true)) {
            throw new IllegalStateException(name + ".getFuture() was already called; a promise has exactly one future");
        }
    }

    final IllegalStateException alreadyCompleted(String method) {
        return new IllegalStateException(name + "." + method + ": the promise is already completed");
    }

    /** {@code serialize}: a memory promise never leaves its process. */
    public final String serialize() {
        throw new UnsupportedOperationException(
            "a MEMORY promise lives in one process and cannot be serialized; use a FILE promise across processes");
    }

    /** {@code type}: always MEMORY. */
    public final TensorPromiseType type() {
        return TensorPromiseType.MEMORY;
    }
}
