package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntConsumer;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;

/**
 * A team of threads working on disjoint slices of one piece of host memory: the calling thread takes slice 0 and
 * helpers from one shared pool take the others. The host reduction of the same-device backend ({@link HostReduction})
 * and the Gloo backend's copy into its result buffer ({@link HostCopy}) both cut their work this way, so the JVM has
 * one pool of such helpers, not one per use.
 *
 * <p>The pool has one thread per available processor less one (the caller is the other), created on first use;
 * they are daemons, so a JVM that never closes a group still exits. A slice's body must close every native handle
 * it makes before it returns: the helpers live as long as the JVM and own nothing between slices.
 *
 * <p>Thread-safe: any number of threads may run teams at once; their slices share the pool's helpers (a slice
 * waits in the pool's queue when all helpers are busy).
 */
final class SliceTeam {
    /** The processors this JVM may use; a team never needs more threads than this. */
    static final int PROCESSORS = Runtime.getRuntime().availableProcessors();

    private static final class Helpers {
        static final ExecutorService POOL = Executors.newFixedThreadPool(Math.max(1, PROCESSORS - 1), runnable -> {
            Thread t = new Thread(runnable, "dtorch-slice-team");
            t.setDaemon(true);
            return t;
        });
    }

    private SliceTeam() {
    }

    /**
     * Runs {@code slice.accept(t)} for every {@code t} in {@code [0, threads)}: slice 0 on the calling thread, the
     * others on helpers, and returns when all have finished. The wait for the helpers is bounded by {@code timeout};
     * {@code what} names the work in the failure (for example "same-device all-reduce: the host reduction"). The first
     * failure is thrown, with the others suppressed; a slice that failed does not stop the other slices.
     *
     * @throws CommTimeoutException      if a helper did not finish within {@code timeout}
     * @throws CommInterruptedException  if the caller was interrupted waiting for the helpers
     */
    static void run(int threads, IntConsumer slice, Duration timeout, String what) {
        if (threads <= 1) {
            slice.accept(0);
            return;
        }
        List<Future<?>> helpers = new ArrayList<>(threads - 1);
        for (int t = 1; t < threads; t++) {
            int index = t;
            helpers.add(Helpers.POOL.submit(() -> slice.accept(index)));
        }
        RuntimeException failure = null;
        try {
            slice.accept(0);
        } catch (RuntimeException e) {
            failure = e;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        for (Future<?> helper : helpers) {
            try {
                helper.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                RuntimeException cause = e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
                failure = add(failure, cause);
            } catch (TimeoutException e) {
                failure = add(failure, new CommTimeoutException(what + ": a helper thread did not finish its slice within " + timeout, e));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failure = add(failure, new CommInterruptedException(what + ": interrupted waiting for the helper threads", e));
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** The start of slice {@code t} of {@code threads} over {@code count} units; slice t ends where t + 1 starts. */
    static long sliceStart(long count, int threads, int t) {
        return count * t / threads;
    }

    private static RuntimeException add(RuntimeException first, RuntimeException next) {
        if (first == null) {
            return next;
        }
        first.addSuppressed(next);
        return first;
    }
}
