package org.dtorch.core.communication;

import java.time.Duration;
import java.util.Objects;

/**
 * Options of the communication core, with one global instance that blocking calls use when the caller
 * gives no timeout of its own (DTorch's {@code GlobalOption::GetCommTimeoutSecond}).
 *
 * <p>Defaults come from system properties, read on the first call of {@link #global()}:
 * <ul>
 *   <li>{@value #TIMEOUT_PROPERTY}: the default deadline of every blocking call, in seconds
 *       (default {@value #DEFAULT_TIMEOUT_SECONDS});</li>
 *   <li>{@value #SPIN_PROPERTY}: how long a waiter spins before it parks, in microseconds (default
 *       {@value #DEFAULT_SPIN_MICROS}). A short spin makes a hand-off between two running threads take
 *       a few microseconds instead of a scheduler wake-up; {@code 0} parks at once.</li>
 * </ul>
 *
 * <p>Thread-safe: instances are immutable; {@link #setGlobal(CommOptions)} publishes atomically.
 *
 * @param timeout        deadline of blocking calls that take none of their own; positive
 * @param spinBeforePark how long a waiter spins before parking; zero or more
 */
public record CommOptions(Duration timeout, Duration spinBeforePark) {

    /** System property for the default timeout, in seconds. */
    public static final String TIMEOUT_PROPERTY = "dtorch.comm.timeoutSeconds";
    /** Default timeout when the property is absent, in seconds. */
    public static final long DEFAULT_TIMEOUT_SECONDS = 300;
    /** System property for the spin before parking, in microseconds. */
    public static final String SPIN_PROPERTY = "dtorch.comm.spinMicros";
    /** Default spin before parking when the property is absent, in microseconds. */
    public static final long DEFAULT_SPIN_MICROS = 50;

    /** Null until the first {@link #global()} reads the system properties. */
    private static volatile CommOptions global;

    /** Validates the components. */
    public CommOptions {
        Objects.requireNonNull(timeout, "timeout");
        Objects.requireNonNull(spinBeforePark, "spinBeforePark");
        validateTimeout(timeout);
        if (spinBeforePark.isNegative()) {
            throw new IllegalArgumentException("spinBeforePark must be >= 0, got " + spinBeforePark);
        }
    }

    /**
     * The options read from the system properties, falling back to the defaults.
     *
     * @throws IllegalArgumentException if a property is set to something that is not a whole number in range
     *                                  (a timeout of 0 or less, a negative spin), naming the property and the value
     */
    public static CommOptions fromSystemProperties() {
        long seconds = longProperty(TIMEOUT_PROPERTY, DEFAULT_TIMEOUT_SECONDS, 1, "a positive whole number of seconds");
        long spin = longProperty(SPIN_PROPERTY, DEFAULT_SPIN_MICROS, 0, "a whole number of microseconds, 0 or more");
        return new CommOptions(Duration.ofSeconds(seconds), Duration.ofNanos(Math.multiplyExact(spin, 1000L)));
    }

    private static long longProperty(String name, long defaultValue, long min, String expected) {
        String text = System.getProperty(name);
        if (text == null) {
            return defaultValue;
        }
        long value;
        try {
            value = Long.parseLong(text.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("system property " + name + " must be " + expected + ", got '" + text + "'");
        }
        if (value < min || value > Long.MAX_VALUE / 1_000_000_000L) {
            throw new IllegalArgumentException("system property " + name + " must be " + expected + ", got '" + text + "'");
        }
        return value;
    }

    /**
     * The options in force for this JVM: the last {@link #setGlobal} or, before any, the system properties.
     *
     * @throws IllegalArgumentException while a property holds a value that is not valid (see {@link #fromSystemProperties()})
     */
    public static CommOptions global() {
        CommOptions current = global;
        if (current == null) {
            synchronized (CommOptions.class) {
                current = global;
                if (current == null) {
                    current = fromSystemProperties();
                    global = current;
                }
            }
        }
        return current;
    }

    /** Replaces the options in force for this JVM; calls that already started keep their deadline. */
    public static void setGlobal(CommOptions options) {
        global = Objects.requireNonNull(options, "options");
    }

    /** A copy with another timeout. */
    public CommOptions withTimeout(Duration newTimeout) {
        return new CommOptions(newTimeout, spinBeforePark);
    }

    /** Rejects a null, zero or negative timeout with a message naming it. */
    public static Duration validateTimeout(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        return timeout;
    }
}
