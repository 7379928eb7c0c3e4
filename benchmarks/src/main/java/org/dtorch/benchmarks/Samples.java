package org.dtorch.benchmarks;

import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * The latencies of one measured operation in one run, in nanoseconds, recorded in an HdrHistogram with
 * three significant digits (percentiles are exact to 0.1%).
 *
 * <p>Not thread-safe: one thread records, and reads only after the recording thread is joined.
 */
final class Samples {
    /** Pre-sized for up to a minute per sample; longer ones resize the histogram. */
    private static final long PRESIZED_MAX = TimeUnit.MINUTES.toNanos(1);

    private final String name;
    private final Histogram histogram = new Histogram(1, PRESIZED_MAX, 3);

    Samples(String name) {
        this.name = name;
        histogram.setAutoResize(true);
    }

    /** Records one sample; a negative one means a broken clock or harness and fails loudly. */
    void add(long nanos) {
        if (nanos < 0) {
            throw new IllegalArgumentException(name + ": negative sample " + nanos + " ns");
        }
        histogram.recordValue(nanos);
    }

    String name() {
        return name;
    }

    long count() {
        return histogram.getTotalCount();
    }

    /** The {@code p}-th percentile (0..100); fails when nothing was recorded. */
    long percentile(double p) {
        if (count() == 0) {
            throw new IllegalStateException(name + ": no samples recorded");
        }
        return histogram.getValueAtPercentile(p);
    }

    long p50() {
        return percentile(50);
    }

    long p99() {
        return percentile(99);
    }

    /** A duration in the unit that reads best. */
    static String format(double nanos) {
        return Unit.NANOS.format(nanos);
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "%s: %d samples, p50 %s, p99 %s", name, count(), format(p50()), format(p99()));
    }
}
