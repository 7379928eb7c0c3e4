package org.dtorch.core.device;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * A host wait for device work with a deadline: CUDA's own synchronize calls block without one, so waits poll
 * {@code query()} instead, and a wedged kernel fails with a message rather than hanging the worker. The first
 * millisecond spins, querying every few hundred nanoseconds, so that short waits return as soon as the work does;
 * longer waits park in 50 us steps, at most that much later than the work finished.
 *
 * <p>Thread-safe: stateless.
 */
final class DeviceWait {
    /** System property: the deadline in seconds of waits that are not given one (default 300). */
    static final String TIMEOUT_PROPERTY = "dtorch.device.syncTimeoutSeconds";
    private static final long SPIN_NANOS = 1_000_000;
    private static final long PARK_NANOS = 50_000;
    private static final int SPINS_PER_QUERY = 64;

    private DeviceWait() {
    }

    /**
     * The deadline of waits that are not given one: {@value #TIMEOUT_PROPERTY} seconds, default 300.
     *
     * @throws IllegalArgumentException when the property is not a whole number of seconds of at least 1
     */
    static Duration defaultTimeout() {
        String text = System.getProperty(TIMEOUT_PROPERTY);
        if (text == null || text.isBlank()) {
            return Duration.ofSeconds(300);
        }
        try {
            long seconds = Long.parseLong(text.strip());
            if (seconds >= 1) {
                return Duration.ofSeconds(seconds);
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("system property " + TIMEOUT_PROPERTY + " must be a whole number of seconds, at least 1, got '"
            + text + "'");
    }

    /**
     * Returns once {@code done} is true.
     *
     * @throws DeviceTimeoutException   when {@code timeout} passes first, naming {@code what}
     * @throws IllegalStateException    when the calling thread is interrupted (its interrupt flag stays set)
     */
    static void until(BooleanSupplier done, Duration timeout, Supplier<String> what) {
        Objects.requireNonNull(timeout, "timeout");
        if (done.getAsBoolean()) {
            return;
        }
        long start = System.nanoTime();
        long limit = timeout.toNanos();
        while (true) {
            long waited = System.nanoTime() - start;
            if (waited < SPIN_NANOS) {
                for (int i = 0; i < SPINS_PER_QUERY; i++) {
                    Thread.onSpinWait();
                }
            } else {
                LockSupport.parkNanos(Math.max(1, Math.min(PARK_NANOS, limit - waited)));
                if (Thread.currentThread().isInterrupted()) {
                    throw new IllegalStateException(what.get() + ": interrupted while waiting for it to finish");
                }
            }
            if (done.getAsBoolean()) {
                return;
            }
            if (System.nanoTime() - start >= limit) {
                throw new DeviceTimeoutException(what.get() + ": did not finish within " + format(timeout));
            }
        }
    }

    private static String format(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
    }
}
