package org.dtorch.core.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntFunction;

/**
 * Runs one body per rank, each on its own platform thread (native collectives must not pin virtual
 * threads), and waits for all with a deadline. The first failure is rethrown with the failing rank.
 */
public final class RankThreads {
    private static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(60);

    private RankThreads() {
    }

    /** Runs {@code body(rank)} for every rank and returns the results in rank order. */
    public static <T> List<T> run(int worldSize, IntFunction<T> body) {
        return run(worldSize, DEFAULT_TIMEOUT, body);
    }

    /** Runs {@code body(rank)} for every rank and returns the results in rank order. */
    public static <T> List<T> run(int worldSize, Duration timeout, IntFunction<T> body) {
        ExecutorService pool = Executors.newFixedThreadPool(worldSize, r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (int rank = 0; rank < worldSize; rank++) {
                int r = rank;
                futures.add(pool.submit(() -> {
                    Thread.currentThread().setName("rank-" + r);
                    return body.apply(r);
                }));
            }
            long deadline = System.nanoTime() + timeout.toNanos();
            List<T> results = new ArrayList<>();
            List<Throwable> failures = new ArrayList<>();
            for (int rank = 0; rank < worldSize; rank++) {
                try {
                    results.add(futures.get(rank).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
                } catch (ExecutionException e) {
                    failures.add(e.getCause());
                    results.add(null);
                } catch (TimeoutException e) {
                    failures.add(new AssertionError("rank " + rank + " did not finish within " + timeout));
                    results.add(null);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted while waiting for rank " + rank, e);
                }
            }
            if (failures.size() == 1 && failures.getFirst() instanceof RuntimeException only) {
                throw only;
            }
            if (!failures.isEmpty()) {
                AssertionError all = new AssertionError(failures.size() + " of " + worldSize + " ranks failed: " + failures);
                failures.forEach(all::addSuppressed);
                throw all;
            }
            return results;
        } finally {
            pool.shutdownNow();
        }
    }

    /** Runs {@code body(rank)} for every rank, for side effects. */
    public static void runAll(int worldSize, java.util.function.IntConsumer body) {
        run(worldSize, rank -> {
            body.accept(rank);
            return null;
        });
    }
}
