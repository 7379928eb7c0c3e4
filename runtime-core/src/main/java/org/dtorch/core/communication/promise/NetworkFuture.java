package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.ByteVector;
import org.bytedeco.pytorch.StringVector;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * The future of a Network promise, in the process that created it. A waiter does not poll: it blocks in
 * the store's {@code wait([key], timeout)} on a client of its own, then reads the outcome once with {@code get(key)}
 * and deletes the key; the claim stays (a few bytes), so a completion that comes after the read is still refused
 * rather than taking a claim that no longer exists and completing twice. One waiter at a time talks to the store
 * (the others wait for it on a lock, each with its own deadline), so the one that deletes the key is never racing
 * another that has yet to start waiting for it.
 *
 * <p>{@link #directCompletion()} starts, once, a daemon thread that waits as {@code get()} does, up to
 * {@link #timeout()}, then completes the view: with the value, the error set, or a {@link CommTimeoutException}
 * naming the key. A thread blocked in the store cannot be interrupted; it ends at its deadline.
 *
 * <p>One class for both kinds, as {@link FileFuture}: {@link #ofTensor} and {@link #ofVoid} hand out a view of one
 * interface each. The value read is owned by this future and closed when it is collected; so is its reference to a
 * store hosted here.
 *
 * <p>Thread-safe: reading the outcome is guarded by a lock; any thread may wait, query or register callbacks.
 */
final class NetworkFuture implements DirectCompletion {
    private final NetworkPromiseStore store;
    private final String key;
    private final String what;
    /** Null for the global timeout at the time of the call. */
    private final Duration getTimeout;
    private final Held held;
    /** Held by the one thread that talks to the store. */
    private final ReentrantLock reading = new ReentrantLock();
    private CompletableFuture<Object> completion;

    /** The outcome once read, and the cleanup of the future: the value closed, the store released. Guarded by itself. */
    private static final class Held implements Runnable {
        final NetworkPromiseStore store;
        NetworkPromiseWire.Outcome outcome;
        boolean storeReleased;

        Held(NetworkPromiseStore store) {
            this.store = store;
        }

        synchronized NetworkPromiseWire.Outcome outcome() {
            return outcome;
        }

        synchronized void set(NetworkPromiseWire.Outcome read) {
            outcome = read;
            releaseStore();
        }

        private void releaseStore() {
            if (!storeReleased) {
                storeReleased = true;
                store.release();
            }
        }

        @Override
        public synchronized void run() {
            if (outcome != null && outcome.value() != null) {
                outcome.value().close();
            }
            releaseStore();
        }
    }

    private NetworkFuture(NetworkPromiseStore store, String key, String what, Duration getTimeout) {
        this.store = store;
        this.key = key;
        this.what = what;
        this.getTimeout = getTimeout;
        this.held = new Held(store);
        FilePromise.CLEANER.register(this, held);
    }

    /** The future of a Network tensor promise on {@code key}, holding a reference to {@code store}. */
    static TensorFuture ofTensor(NetworkPromiseStore store, String key, Duration getTimeout) {
        return new TensorView(new NetworkFuture(store, key, "TensorFuture", getTimeout));
    }

    /** The future of a Network void promise on {@code key}, holding a reference to {@code store}. */
    static VoidFuture ofVoid(NetworkPromiseStore store, String key, Duration getTimeout) {
        return new VoidView(new NetworkFuture(store, key, "VoidFuture", getTimeout));
    }

    /** The default deadline of {@code get()}: the one the promise was made with, else the global timeout. */
    Duration timeout() {
        return CompletionWait.ownOrGlobal(getTimeout);
    }

    /**
     * True once the outcome is read or present in the store; false, without asking the store, while another thread
     * is waiting in it.
     */
    boolean isReady() {
        if (held.outcome() != null) {
            return true;
        }
        if (!reading.tryLock()) {
            return false;
        }
        try (StringVector keys = new StringVector(key)) {
            return held.outcome() != null || store.call(CommOptions.global().timeout(), client -> client.check(keys));
        } catch (CommException e) {
            throw e;
        } catch (RuntimeException e) {
            throw storeFailure("isReady()", e);
        } finally {
            reading.unlock();
        }
    }

    /** The outcome, waiting up to {@code timeout}; null at the deadline. */
    NetworkPromiseWire.Outcome await(Duration timeout, String call) {
        NetworkPromiseWire.Outcome outcome = held.outcome();
        if (outcome != null) {
            return outcome;
        }
        Deadline deadline = Deadline.after(CommOptions.validateTimeout(timeout));
        try {
            if (!reading.tryLock(deadline.remainingNanos(), TimeUnit.NANOSECONDS)) {
                return held.outcome();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommInterruptedException(what + "." + call + " was interrupted waiting for key " + key, e);
        }
        try {
            return held.outcome() != null ? held.outcome() : read(deadline, call);
        } finally {
            reading.unlock();
        }
    }

    /** With {@link #reading} held: waits in the store until the deadline, then reads, keeps and deletes the outcome. */
    private NetworkPromiseWire.Outcome read(Deadline deadline, String call) {
        try (StringVector keys = new StringVector(key)) {
            NetworkPromiseWire.Outcome outcome = store.call(Duration.ofMillis(remainingMillis(deadline)), client -> {
                try (Milliseconds wait = new Milliseconds(remainingMillis(deadline))) {
                    client._wait(keys, wait);
                } catch (RuntimeException e) {
                    if (deadline.expired() && !client.check(keys)) {
                        return null;
                    }
                    throw e;
                }
                NetworkPromiseWire.Outcome read;
                try (ByteVector bytes = client.get(key)) {
                    read = NetworkPromiseWire.decode(bytes.get(), key);
                }
                client.deleteKey(key);
                return read;
            });
            if (outcome != null) {
                held.set(outcome);
                completeView(outcome);
            }
            return outcome;
        } catch (CommException | IllegalStateException e) {
            throw e;
        } catch (RuntimeException e) {
            throw storeFailure(call, e);
        }
    }

    /** What is left of {@code deadline} in whole milliseconds, rounded up, so that c10d's deadline is not before ours. */
    private static long remainingMillis(Deadline deadline) {
        return Math.max(1, (deadline.remainingNanos() + 999_999) / 1_000_000);
    }

    private CommException storeFailure(String call, RuntimeException e) {
        return new CommException(what + "." + call + " on key " + key + " in the TCPStore at " + store + " failed: " + e.getMessage(), e);
    }

    /** The outcome within {@link #timeout()}, or a {@link CommTimeoutException} naming the key and the store. */
    NetworkPromiseWire.Outcome awaitOrThrow(String call) {
        Duration timeout = timeout();
        NetworkPromiseWire.Outcome outcome = await(timeout, call);
        if (outcome == null) {
            throw new CommTimeoutException(what + "." + call + " " + Deadline.after(timeout).timedOutAfter() + ": no value or error was set "
                + "under key " + key + " in the TCPStore at " + store + " (the producing operator has not run)");
        }
        return outcome;
    }

    /** A new reference to the value (null for a void future); throws the error set. */
    Tensor valueOrThrow(NetworkPromiseWire.Outcome outcome) {
        if (outcome.error() != null) {
            throw new FutureFailedException(what, outcome.error());
        }
        return outcome.value() == null ? null : new Tensor(outcome.value());
    }

    CompletableFuture<Object> toCompletableFuture() {
        return FutureCallbacks.offCompleter(rawCompletion());
    }

    @Override
    public CompletableFuture<?> directCompletion() {
        return rawCompletion();
    }

    /** The view completed once the outcome is read; its first call starts the thread that waits for it. */
    private synchronized CompletableFuture<Object> rawCompletion() {
        if (completion == null) {
            completion = new CompletableFuture<>();
            NetworkPromiseWire.Outcome outcome = held.outcome();
            if (outcome != null) {
                completeView(outcome);
            } else {
                Thread.ofPlatform().daemon().name("dtorch-network-future " + key).start(this::completeViewAtDeadline);
            }
        }
        return completion;
    }

    private void completeViewAtDeadline() {
        try {
            completeView(awaitOrThrow("toCompletableFuture()"));
        } catch (RuntimeException e) {
            synchronized (this) {
                completion.completeExceptionally(e);
            }
        }
    }

    /** Completes the view, if there is one, with the outcome; the value stays owned by this future. */
    private synchronized void completeView(NetworkPromiseWire.Outcome outcome) {
        if (completion == null) {
            return;
        }
        if (outcome.error() != null) {
            completion.completeExceptionally(outcome.error());
        } else {
            completion.complete(outcome.value());
        }
    }

    /** What both views forward alike. Thread-safe, as the future. */
    private abstract static class View implements DirectCompletion {
        final NetworkFuture future;

        View(NetworkFuture future) {
            this.future = future;
        }

        public boolean isReady() {
            return future.isReady();
        }

        public Duration timeout() {
            return future.timeout();
        }

        @Override
        public CompletableFuture<?> directCompletion() {
            return future.directCompletion();
        }
    }

    /** A {@link NetworkFuture} seen as a {@link TensorFuture}. */
    private static final class TensorView extends View implements TensorFuture {
        TensorView(NetworkFuture future) {
            super(future);
        }

        @Override
        public Tensor get() {
            return future.valueOrThrow(future.awaitOrThrow("get()"));
        }

        @Override
        public Optional<Tensor> waitFor(Duration timeout) {
            NetworkPromiseWire.Outcome outcome = future.await(timeout, "waitFor()");
            return outcome == null ? Optional.empty() : Optional.of(future.valueOrThrow(outcome));
        }

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public CompletableFuture<Tensor> toCompletableFuture() {
            return (CompletableFuture) future.toCompletableFuture();
        }
    }

    /** A {@link NetworkFuture} seen as a {@link VoidFuture}. */
    private static final class VoidView extends View implements VoidFuture {
        VoidView(NetworkFuture future) {
            super(future);
        }

        @Override
        public void get() {
            future.valueOrThrow(future.awaitOrThrow("get()"));
        }

        @Override
        public boolean waitFor(Duration timeout) {
            NetworkPromiseWire.Outcome outcome = future.await(timeout, "waitFor()");
            if (outcome != null) {
                future.valueOrThrow(outcome);
            }
            return outcome != null;
        }

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public CompletableFuture<Void> toCompletableFuture() {
            return (CompletableFuture) future.toCompletableFuture();
        }
    }
}
