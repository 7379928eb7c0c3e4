package org.dtorch.benchmarks;

import java.util.Arrays;
import java.util.Locale;

/**
 * Latency samples of one measured operation, in nanoseconds, and their percentiles.
 *
 * <p>Not thread-safe: one thread records.
 */
final class Samples {
    private final String name;
    private final long[] nanos;
    private int count;

    Samples(String name, int capacity) {
        this.name = name;
        this.nanos = new long[capacity];
    }

    void add(long sample) {
        nanos[count++] = sample;
    }

    String name() {
        return name;
    }

    int count() {
        return count;
    }

    /** The {@code p}-th percentile (0..100), nearest rank. */
    long percentile(double p) {
        long[] sorted = Arrays.copyOf(nanos, count);
        Arrays.sort(sorted);
        int index = (int) Math.ceil(p / 100.0 * count) - 1;
        return sorted[Math.max(0, Math.min(count - 1, index))];
    }

    long p50() {
        return percentile(50);
    }

    long p99() {
        return percentile(99);
    }

    /** A duration in the unit that reads best. */
    static String format(long nanos) {
        if (nanos >= 1_000_000_000L) {
            return String.format(Locale.ROOT, "%.2f s", nanos / 1e9);
        }
        if (nanos >= 1_000_000L) {
            return String.format(Locale.ROOT, "%.2f ms", nanos / 1e6);
        }
        return String.format(Locale.ROOT, "%.2f us", nanos / 1e3);
    }
}
