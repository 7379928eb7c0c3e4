package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/**
 * One platform thread per rank, kept for a whole benchmark, and the timing of one collective: the ranks
 * are released together by a barrier and rank 0's time to return is the sample.
 *
 * <p>Not thread-safe: the harness thread drives it.
 */
final class RankPool implements AutoCloseable {
    /** How long the ranks may take to meet at the start barrier. */
    private static final long BARRIER_TIMEOUT_SECONDS = 300;
    /** How long one rank's body may take (the collectives' own deadline is 300 s too). */
    private static final long RANK_TIMEOUT_SECONDS = 600;

    private final int world;
    private final ExecutorService pool;
    private final CyclicBarrier start;

    /** A body run on one rank. */
    interface RankBody {
        void run(int rank) throws Exception;
    }

    RankPool(int world) {
        this.world = world;
        this.pool = Executors.newFixedThreadPool(world);
        this.start = new CyclicBarrier(world);
    }

    /** Runs {@code body} on every rank; returns rank 0's time from the common start to its return, in ns. */
    long time(RankBody body) throws Exception {
        return time(rank -> { }, body);
    }

    /**
     * Runs {@code setup}, untimed, then {@code body} on every rank; returns rank 0's time from the common start
     * (after every rank's setup) to its return, in ns.
     */
    long time(RankBody setup, RankBody body) throws Exception {
        List<Future<Long>> futures = new ArrayList<>();
        for (int rank = 0; rank < world; rank++) {
            int r = rank;
            futures.add(pool.submit(() -> {
                setup.run(r);
                start.await(BARRIER_TIMEOUT_SECONDS, TimeUnit.SECONDS);
                long t0 = System.nanoTime();
                body.run(r);
                return System.nanoTime() - t0;
            }));
        }
        for (Future<Long> f : futures) {
            f.get(RANK_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        }
        return futures.get(0).get();
    }

    /** Runs {@code body} on every rank and returns the results in rank order. */
    <T> List<T> onRanks(IntFunction<T> body) throws Exception {
        List<Future<T>> futures = new ArrayList<>();
        for (int rank = 0; rank < world; rank++) {
            int r = rank;
            futures.add(pool.submit(() -> body.apply(r)));
        }
        List<T> results = new ArrayList<>();
        for (Future<T> f : futures) {
            results.add(f.get(RANK_TIMEOUT_SECONDS, TimeUnit.SECONDS));
        }
        return results;
    }

    @Override
    public void close() {
        pool.shutdownNow();
    }
}
