package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One {@link VoidFuture} for several, typically one per device (DTorch's {@code VoidFutureCollect}).
 * It is ready when all of them are done, or as soon as one fails: the first failure propagates at once,
 * so a caller never waits for devices whose work can no longer matter.
 *
 * <p>Thread-safe: any thread may wait, query or register callbacks.
 */
public final class VoidFutureCollect implements VoidFuture, DirectCompletion {
    private final CompletableVoidFuture all;
    private final int size;

    /** Collects {@code futures}; an empty list is ready at once. {@link #get()} waits up to the global timeout. */
    public VoidFutureCollect(List<? extends VoidFuture> futures) {
        this(futures, null);
    }

    /**
     * Collects {@code futures}, with the deadline of {@link #get()} (a runtime's timeout); null for the
     * global communication timeout at the time of the call.
     */
    public VoidFutureCollect(List<? extends VoidFuture> futures, Duration getTimeout) {
        Objects.requireNonNull(futures, "futures");
        this.size = futures.size();
        CompletableFuture<Void> done = new CompletableFuture<>();
        AtomicInteger pending = new AtomicInteger(size);
        if (size == 0) {
            done.complete(null);
        }
        for (int i = 0; i < size; i++) {
            VoidFuture f = Objects.requireNonNull(futures.get(i), "future " + i);
            int index = i;
            // Our own futures are joined on their completer's thread (no callback thread in between).
            CompletableFuture<?> member = f instanceof DirectCompletion direct ? direct.directCompletion() : f.toCompletableFuture();
            member.whenComplete((ignored, error) -> {
                if (error != null) {
                    Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
                    done.completeExceptionally(new CollectedFailure(index, size, cause));
                } else if (pending.decrementAndGet() == 0) {
                    done.complete(null);
                }
            });
        }
        this.all = new CompletableVoidFuture(done, "VoidFutureCollect of " + size, getTimeout);
    }

    /** Collects the given futures. */
    public static VoidFutureCollect of(VoidFuture... futures) {
        return new VoidFutureCollect(List.of(futures));
    }

    /** The number of futures collected. */
    public int size() {
        return size;
    }

    @Override
    public Duration timeout() {
        return all.timeout();
    }

    @Override
    public CompletableFuture<?> directCompletion() {
        return all.directCompletion();
    }

    @Override
    public void get() {
        all.get();
    }

    @Override
    public boolean waitFor(Duration timeout) {
        return all.waitFor(timeout);
    }

    @Override
    public boolean isReady() {
        return all.isReady();
    }

    @Override
    public CompletableFuture<Void> toCompletableFuture() {
        return all.toCompletableFuture();
    }

    /** Says which of the collected futures failed; the original error is the cause. */
    static final class CollectedFailure extends RuntimeException {
        CollectedFailure(int index, int size, Throwable cause) {
            super("future " + index + " of " + size + " failed: " + cause, cause);
        }
    }
}
