package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * What the File tensor and void futures share: waiting on the promise's futex, reading the outcome once,
 * the {@link CompletableFuture} view through the process's {@link FileFutureWatcher}, and cleanup (the
 * region's names are removed once the outcome is read, or when the future is dropped unread; the mapping
 * and a value read go when the future is collected).
 *
 * <p>Thread-safe: the outcome is read once under a lock; waiting needs none.
 */
abstract class FileFuture {
    private final Outcome outcome;
    private final String what;
    /** Null for the global timeout at the time of the call. */
    private final Duration getTimeout;
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

        synchronized void read() {
            if (read) {
                return;
            }
            try {
                error = region.errorText();
                if (error == null && tensorKind) {
                    tensor = region.readValue();
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

    FileFuture(FilePromiseRegion region, boolean tensorKind, String what, Duration getTimeout) {
        this.outcome = new Outcome(region, tensorKind);
        this.what = what;
        this.getTimeout = getTimeout;
        FilePromise.CLEANER.register(this, outcome);
    }

    /** True only when a value or an error is present. */
    public final boolean isReady() {
        return outcome.region.isDone();
    }

    /** The default deadline of {@code get()}: the one the promise was made with, else the global timeout. */
    public final Duration timeout() {
        return CompletionWait.ownOrGlobal(getTimeout);
    }

    /** Waits up to {@link #timeout()}, or throws naming the promise. */
    final void awaitOrThrow() {
        Duration timeout = timeout();
        if (!outcome.region.awaitDone(timeout.toNanos(), what + ".get()")) {
            throw new CommTimeoutException(what + ".get() " + Deadline.after(timeout).timedOutAfter()
                + ": no value or error was set (File promise " + outcome.region.name() + "; the producing operator has not run)");
        }
    }

    /** Waits up to {@code timeout}; false if still pending. */
    final boolean await(Duration timeout) {
        CommOptions.validateTimeout(timeout);
        return outcome.region.awaitDone(timeout.toNanos(), what + ".waitFor()");
    }

    /** The value read (owned by this future) after a successful wait; throws the published error. */
    final Tensor valueOrThrow() {
        outcome.read();
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
    final <T> CompletableFuture<T> completion() {
        return FutureCallbacks.offCompleter((CompletableFuture<T>) directCompletion());
    }

    /** Completed by the process's watcher thread when the promise is done; for internal stages only. */
    public final synchronized CompletableFuture<?> directCompletion() {
        if (completion == null) {
            CompletableFuture<Object> view = new CompletableFuture<>();
            completion = view;
            FileFutureWatcher.instance().watch(() -> {
                if (!isReady()) {
                    return false;
                }
                try {
                    view.complete(valueOrThrow());
                } catch (FutureFailedException e) {
                    view.completeExceptionally(e.getCause());
                }
                return true;
            });
        }
        return completion;
    }
}
