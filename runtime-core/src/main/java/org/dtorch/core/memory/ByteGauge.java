package org.dtorch.core.memory;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Live and peak bytes of one kind of memory: holders {@link #add} what they take and {@link #subtract} what they give
 * back; the peak is the highest live value since the start or the last {@link #resetPeak()}.
 *
 * <p>Thread-safe: any thread may call any method. The peak follows the live value just after it moves, so a reader
 * racing with an {@link #add} may see the new live value above the peak for that moment.
 */
public final class ByteGauge {
    private final AtomicLong live = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    /** Counts {@code bytes} more as live. */
    public void add(long bytes) {
        long now = live.addAndGet(bytes);
        if (now > peak.get()) {
            peak.accumulateAndGet(now, Math::max);
        }
    }

    /** Counts {@code bytes} fewer as live. */
    public void subtract(long bytes) {
        live.addAndGet(-bytes);
    }

    /** Bytes live now. */
    public long live() {
        return live.get();
    }

    /** The highest live value since the start or the last {@link #resetPeak()}. */
    public long peak() {
        return peak.get();
    }

    /** Starts the peak again from the live value. */
    public void resetPeak() {
        peak.set(live.get());
    }

    /** Forgets everything live (its holders closed it all at once); the peak stays. */
    public void clearLive() {
        live.set(0);
    }
}
