package org.dtorch.benchmarks;

import java.util.Locale;

/**
 * How a figure is printed: three significant digits, and durations in the unit that reads best (the unit of
 * the median is used for a whole range, so the figures of one cell compare at a glance).
 *
 * <p>Thread-safe: stateless.
 */
enum Unit {
    /** A duration, given in nanoseconds. */
    NANOS {
        @Override
        String suffix(double median) {
            return Math.abs(median) >= 1e9 ? " s" : Math.abs(median) >= 1e6 ? " ms" : " us";
        }

        @Override
        double scale(double median) {
            return Math.abs(median) >= 1e9 ? 1e9 : Math.abs(median) >= 1e6 ? 1e6 : 1e3;
        }
    },
    /** A share of one core or of a whole, given in percent. */
    PERCENT {
        @Override
        String suffix(double median) {
            return "%";
        }
    },
    /** A bandwidth, given in GB/s (10^9 bytes). */
    GIGABYTES_PER_SECOND {
        @Override
        String suffix(double median) {
            return " GB/s";
        }
    },
    /** A plain ratio. */
    RATIO {
        @Override
        String suffix(double median) {
            return "";
        }
    };

    abstract String suffix(double median);

    double scale(double median) {
        return 1;
    }

    /** A tensor size in the largest binary unit it is a whole multiple of: {@code 256 MiB}, {@code 1 KiB}. */
    static String size(long bytes) {
        if (bytes >= 1L << 20 && bytes % (1L << 20) == 0) {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1L << 10 && bytes % (1L << 10) == 0) {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }

    /** A count as the tables print it: {@code 20,000}. */
    static String count(long n) {
        return String.format(Locale.ROOT, "%,d", n);
    }

    /** One value with its unit. */
    String format(double value) {
        return number(value / scale(value)) + suffix(value);
    }

    /** A range in the unit of {@code median}: {@code 0.81 to 0.93 us}. */
    String formatRange(double min, double max, double median) {
        double scale = scale(median);
        return number(min / scale) + " to " + number(max / scale) + suffix(median);
    }

    /**
     * Three significant digits, the precision of the samples' histograms ({@code 110 us}, {@code 1.99 us},
     * {@code 0.00213}); whole numbers from 1000 up.
     */
    private static String number(double value) {
        return Math.abs(value) >= 1000 ? String.format(Locale.ROOT, "%.0f", value) : String.format(Locale.ROOT, "%.3g", value);
    }
}
