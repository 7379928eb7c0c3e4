package org.dtorch.core.communication;

import java.time.Duration;

/**
 * A point in time by which a blocking call must return, and the wording of its timeout errors.
 *
 * <p>Not thread-safe: one waiting thread owns a deadline; it is an immutable value otherwise.
 */
public final class Deadline {
    private final Duration timeout;
    private final long deadlineNanos;

    private Deadline(Duration timeout) {
        this.timeout = CommOptions.validateTimeout(timeout);
        this.deadlineNanos = System.nanoTime() + saturatedNanos(timeout);
    }

    /** A deadline {@code timeout} from now. */
    public static Deadline after(Duration timeout) {
        return new Deadline(timeout);
    }

    /** Nanoseconds left, zero or negative once the deadline has passed. */
    public long remainingNanos() {
        return deadlineNanos - System.nanoTime();
    }

    /** True once the deadline has passed. */
    public boolean expired() {
        return remainingNanos() <= 0;
    }

    /** The whole timeout this deadline was made with. */
    public Duration timeout() {
        return timeout;
    }

    /** {@code "timed out after 30 s"}, the middle of every timeout message. */
    public String timedOutAfter() {
        return "timed out after " + format(timeout);
    }

    /** A short human form of a duration: {@code 30 s}, {@code 1.5 s}, {@code 250 ms}, {@code 40 us}. */
    public static String format(Duration d) {
        long nanos = saturatedNanos(d);
        if (nanos >= 1_000_000_000L) {
            return trim(nanos / 1e9) + " s";
        }
        if (nanos >= 1_000_000L) {
            return trim(nanos / 1e6) + " ms";
        }
        return trim(nanos / 1e3) + " us";
    }

    private static String trim(double value) {
        return java.math.BigDecimal.valueOf(value).round(new java.math.MathContext(3)).stripTrailingZeros().toPlainString();
    }

    private static long saturatedNanos(Duration d) {
        try {
            return d.toNanos();
        } catch (ArithmeticException overflow) {
            return Long.MAX_VALUE / 4;
        }
    }
}
