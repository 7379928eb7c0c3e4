package org.dtorch.benchmarks;

import java.util.Arrays;
import java.util.List;

/**
 * One figure over the runs of a benchmark: its median (what the tables report) and its range, the
 * lowest and highest run. Never the best run alone.
 *
 * <p>Thread-safe: immutable.
 *
 * @param median the median of the runs (the mean of the two middle runs for an even count)
 * @param min    the lowest run
 * @param max    the highest run
 * @param runs   how many runs
 */
record Spread(double median, double min, double max, int runs) {

    static Spread of(List<Double> values) {
        if (values.isEmpty()) {
            throw new IllegalArgumentException("no runs to summarize");
        }
        double[] sorted = values.stream().mapToDouble(Double::doubleValue).toArray();
        Arrays.sort(sorted);
        int n = sorted.length;
        double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        return new Spread(median, sorted[0], sorted[n - 1], n);
    }
}
