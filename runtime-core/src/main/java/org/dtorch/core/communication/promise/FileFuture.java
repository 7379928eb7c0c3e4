package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * The future of a File promise, in the process that created the promise: waiting on the promise's futex,
 * reading the outcome once, the {@link CompletableFuture} view through the process's {@link FileFutureWatcher},
 * and cleanup (the region's names are removed once the outcome is read, or when the future is dropped unread;
 * the mapping and a value read go when the future is collected).
 *
 * <p>One class for both kinds, told apart by what they read and give ({@code T}): a tensor future reads the
 * value once (a small one is copied out of shared memory, a large one is viewed in place) and every
 * {@code get} returns a new reference to it; a void future reads only whether an error was set.
 * {@link TensorFuture} and {@link VoidFuture} differ in their {@code get()}'s return type, which no one class
 * can implement both of, so {@link #ofTensor} and {@link #ofVoid} hand out a view of the one interface each
 * that only forwards.
 *
 * <p>Thread-safe: the outcome is read once under a lock; waiting needs none; any thread may wait, query or
 * register callbacks.
 *
 * @param <T> what {@code get()} gives: {@link Tensor}, or {@link Void} (always null)
 */
final class FileFuture<T> implements DirectCompletion {
    private final Outcome outcome;
    private final String what;
    /** Null for the global timeout at the time of the call. */
    private final Duration getTimeout;
    /** A tensor future's expected value when it would be copied out of the inline bytes, else null. */
    private final ExpectedValue expected;
    private CompletableFuture<Object> completion;

    /** The outcome, read once; the cleanup action of its future. Guarded by itself. */
    private static final class Outcome implements Runnable {
        final FilePromiseRegion region;
        final boolean tensorKind;
        Tensor tensor;
        String error;
        boolean read;

        Outcome(FilePromiseRegion region, boolean tensorKind) {
            this.region = region;
            this.tensorKind = tensorKind;
        }

        /** Reads the outcome once; {@code prepared}, if not null, may give the value's tensor, allocated already. */
        synchronized void read(PreparedReference prepared) {
            if (read) {
                return;
            }
            try {
                error = region.errorText();
                if (error == null && tensorKind) {
                    tensor = region.readValue(prepared);
                }
            } catch (RuntimeException e) {
                error = "reading the value failed: " + RemoteFailureException.describe(e);
            }
            read = true;
            region.forget();
        }

        @Override
        public synchronized void run() {
            region.abandon();
            if (tensor != null) {
                tensor.close();
                tensor = null;
            }
            region.release();
        }
    }

    private FileFuture(FilePromiseRegion region, boolean tensorKind, String what, Duration getTimeout, ExpectedValue expected) {
        this.outcome = new Outcome(region, tensorKind);
        this.what = what;
        this.getTimeout = getTimeout;
        this.expected = expected != null && expected.bytes() <= FilePromiseLayout.INLINE_CAPACITY ? expected : null;
        FilePromise.CLEANER.register(this, outcome);
    }

    /**
     * The future of a File tensor promise over {@code region} (shared with the promise); {@code expected}, if not null,
     * is what its getter allocates before it sleeps.
     */
    static TensorFuture ofTensor(FilePromiseRegion region, Duration getTimeout, ExpectedValue expected) {
        return new TensorView(new FileFuture<>(region, true, "TensorFuture", getTimeout, expected));
    }

    /** The future of a File void promise over {@code region} (shared with the promise). */
    static VoidFuture ofVoid(FilePromiseRegion region, Duration getTimeout) {
        return new VoidView(new FileFuture<Void>(region, false, "VoidFuture", getTimeout, null));
    }

    /** True only when a value or an error is present. */
    boolean isReady() {
        return outcome.region.isDone();
    }

    /** The default deadline of {@code get()}: the one the promise was made with, else the global timeout. */
    Duration timeout() {
        return CompletionWait.ownOrGlobal(getTimeout);
    }

    /**
     * Waits up to {@link #timeout()}, or throws naming the promise; then gives the result or throws the error set. A
     * tensor future that has to sleep makes the handle it returns first, and the value's tensor when its shape is
     * expected ({@link PreparedReference}), so that the woken getter makes no native call.
     */
    T get() {
        Duration timeout = timeout();
        try (PreparedReference prepared = outcome.tensorKind ? prepared() : null) {
            if (!outcome.region.awaitDone(timeout.toNanos(), what + ".get()", prepared)) {
                throw new CommTimeoutException(what + ".get() " + Deadline.after(timeout).timedOutAfter()
                    + ": no value or error was set (File promise " + outcome.region.name() + "; the producing operator has not run)");
            }
            return result(prepared);
        }
    }

    /**
     * Waits up to {@code timeout}: false if still pending; throws the error set. {@code prepared}, if not null, makes
     * its handle before the first sleep.
     */
    boolean waitFor(Duration timeout, PreparedReference prepared) {
        CommOptions.validateTimeout(timeout);
        if (!outcome.region.awaitDone(timeout.toNanos(), what + ".waitFor()", prepared)) {
            return false;
        }
        valueOrThrow(prepared);
        return true;
    }

    /**
     * After a successful wait: what {@code get()} gives (a new reference for a tensor, in {@code prepared}'s handle
     * when it made one; null for a void future); throws the error set.
     */
    @SuppressWarnings("unchecked")
    T result(PreparedReference prepared) {
        Tensor value = valueOrThrow(prepared);
        if (!outcome.tensorKind) {
            return null;
        }
        return (T) (prepared != null ? prepared.referenceTo(value) : new Tensor(value));
    }

    /** What a tensor future's getter prepares before it sleeps. */
    PreparedReference prepared() {
        return new PreparedReference(expected);
    }

    /**
     * The value read (owned by this future; null for a void future) after a successful wait; throws the error set.
     * {@code prepared}, if not null, may give the value's tensor.
     */
    private Tensor valueOrThrow(PreparedReference prepared) {
        outcome.read(prepared);
        synchronized (outcome) {
            if (outcome.error != null) {
                Throwable local = outcome.region.localError();
                throw new FutureFailedException(what, local != null ? local : new RemoteFailureException(outcome.error));
            }
            return outcome.tensor;
        }
    }

    /** A view completed from a callback thread once the process's watcher thread sees the promise done. */
    @SuppressWarnings("unchecked")
    CompletableFuture<T> toCompletableFuture() {
        return FutureCallbacks.offCompleter((CompletableFuture<T>) directCompletion());
    }

    /** Completed by the process's watcher thread when the promise is done; for internal stages only. */
    @Override
    public synchronized CompletableFuture<?> directCompletion() {
        if (completion == null) {
            CompletableFuture<Object> view = new CompletableFuture<>();
            completion = view;
            FileFutureWatcher.instance().watch(() -> {
                if (!isReady()) {
                    return false;
                }
                try {
                    view.complete(valueOrThrow(null));
                } catch (FutureFailedException e) {
                    view.completeExceptionally(e.getCause());
                }
                return true;
            });
        }
        return completion;
    }

    /** What both views forward alike. Thread-safe, as the future. */
    private abstract static class View<T> implements DirectCompletion {
        final FileFuture<T> future;

        View(FileFuture<T> future) {
            this.future = future;
        }

        public boolean isReady() {
            return future.isReady();
        }

        public Duration timeout() {
            return future.timeout();
        }

        public CompletableFuture<T> toCompletableFuture() {
            return future.toCompletableFuture();
        }

        @Override
        public CompletableFuture<?> directCompletion() {
            return future.directCompletion();
        }
    }

    /** A {@link FileFuture} seen as a {@link TensorFuture}. */
    private static final class TensorView extends View<Tensor> implements TensorFuture {
        TensorView(FileFuture<Tensor> future) {
            super(future);
        }

        @Override
        public Tensor get() {
            return future.get();
        }

        @Override
        public Optional<Tensor> waitFor(Duration timeout) {
            try (PreparedReference prepared = future.prepared()) {
                return future.waitFor(timeout, prepared) ? Optional.of(future.result(prepared)) : Optional.empty();
            }
        }
    }

    /** A {@link FileFuture} seen as a {@link VoidFuture}. */
    private static final class VoidView extends View<Void> implements VoidFuture {
        VoidView(FileFuture<Void> future) {
            super(future);
        }

        @Override
        public void get() {
            future.get();
        }

        @Override
        public boolean waitFor(Duration timeout) {
            return future.waitFor(timeout, null);
        }
    }
}
