package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * Waiting for a {@link CompletableFuture} with a deadline: spin briefly (a value set by a running
 * thread is then seen within microseconds), then park until completion pushes a wake-up.
 *
 * <p>Thread-safe: stateless.
 */
final class CompletionWait {

    private CompletionWait() {
    }

    /**
     * Waits until {@code future} is done or {@code timeoutNanos} pass.
     *
     * @return true if done (normally or exceptionally), false at the deadline
     * @throws CommInterruptedException if the thread is interrupted
     */
    static boolean awaitDone(CompletableFuture<?> future, long timeoutNanos, String what) {
        return awaitDone(future, timeoutNanos, what, null);
    }

    /**
     * As {@link #awaitDone(CompletableFuture, long, String)}; {@code beforePark}, if not null, is prepared once the spin
     * has not seen the future done and before the thread parks, so that the handles are made while the thread has
     * nothing else to do, and a completion during the spin costs no preparation.
     */
    static boolean awaitDone(CompletableFuture<?> future, long timeoutNanos, String what, PreparedReference beforePark) {
        if (future.isDone()) {
            return true;
        }
        long start = System.nanoTime();
        long spinEnd = start + Math.min(CommOptions.global().spinBeforePark().toNanos(), timeoutNanos);
        while (System.nanoTime() - spinEnd < 0) {
            if (future.isDone()) {
                return true;
            }
            Thread.onSpinWait();
        }
        if (beforePark != null) {
            beforePark.beforeSleep();
        }
        long remaining = timeoutNanos - (System.nanoTime() - start);
        if (remaining <= 0) {
            return future.isDone();
        }
        try {
            future.get(remaining, TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException | java.util.concurrent.CancellationException failed) {
            return true;
        } catch (TimeoutException notYet) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommInterruptedException(what + " was interrupted while waiting", e);
        }
    }

    /** The deadline of a future's {@code get()}: its own, or else the global timeout in force now. */
    static Duration ownOrGlobal(Duration own) {
        return own != null ? own : CommOptions.global().timeout();
    }

    /**
     * Waits up to {@code timeout} for {@code future}, or throws a {@link CommTimeoutException} that reads
     * "{@code <what> timed out after <timeout>: <pending>}".
     */
    static void awaitOrThrow(CompletableFuture<?> future, Duration timeout, String what, String pending) {
        awaitOrThrow(future, timeout, what, pending, null);
    }

    /** As {@link #awaitOrThrow(CompletableFuture, Duration, String, String)}, preparing {@code beforePark} as {@link #awaitDone} does. */
    static void awaitOrThrow(CompletableFuture<?> future, Duration timeout, String what, String pending, PreparedReference beforePark) {
        if (!awaitDone(future, timeout.toNanos(), what, beforePark)) {
            throw new CommTimeoutException(what + " " + Deadline.after(timeout).timedOutAfter() + ": " + pending);
        }
    }
}
