package org.dtorch.benchmarks;

/**
 * Two variants timed against each other on every rank: a warm-up round, then {@code rounds} rounds of
 * {@code perRound} samples of each, the variant that goes first alternating from round to round, so that drift of a
 * noisy machine and the cost of going first or second hit both alike. Each sample is {@link RankPool#time}.
 *
 * <p>Thread-safe: stateless.
 */
final class AlternatingRounds {

    private AlternatingRounds() {
    }

    /** Adds {@code rounds * perRound} samples of {@code a} to {@code aSamples} and of {@code b} to {@code bSamples}. */
    static void measure(RankPool pool, int rounds, int perRound, RankPool.RankBody a, Samples aSamples, RankPool.RankBody b,
                        Samples bSamples) throws Exception {
        for (int round = -1; round < rounds; round++) { // round -1 warms up; odd rounds take b first
            for (int part = 0; part < 2; part++) {
                boolean isA = part == (round & 1);
                RankPool.RankBody body = isA ? a : b;
                for (int i = 0; i < perRound; i++) {
                    long t = pool.time(body);
                    if (round >= 0) {
                        (isA ? aSamples : bSamples).add(t);
                    }
                }
            }
        }
    }
}
