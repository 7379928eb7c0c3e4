package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;

/**
 * Linux futexes on 32-bit words of shared mappings, through {@code syscall(SYS_futex, ...)} ({@link Libc}):
 * a thread in any process that maps the word sleeps in the kernel until another one changes the word and
 * wakes it. Shared (not private) futexes, so processes meet on the same physical page.
 *
 * <p>Thread-safe: stateless.
 */
public final class Futex {
    private static final int FUTEX_WAIT = 0;
    private static final int FUTEX_WAKE = 1;

    private Futex() {
    }

    /** Why {@link #await} returned. */
    public enum Wake {
        /** Woken by {@link #wake}, or the word no longer held the expected value. */
        CHANGED,
        /** The timeout passed. */
        TIMED_OUT,
        /** A signal interrupted the sleep; re-check and wait again. */
        INTERRUPTED
    }

    /**
     * Sleeps while the int at {@code offset} of {@code segment} equals {@code expected}, up to
     * {@code timeoutNanos}.
     */
    public static Wake await(MemorySegment segment, long offset, int expected, long timeoutNanos) {
        long result = Libc.futex(segment.asSlice(offset, 4), FUTEX_WAIT, expected, Math.max(0, timeoutNanos));
        if (result >= 0) {
            return Wake.CHANGED;
        }
        int errno = (int) -result;
        return switch (errno) {
            case Libc.EAGAIN -> Wake.CHANGED;
            case Libc.ETIMEDOUT -> Wake.TIMED_OUT;
            case Libc.EINTR -> Wake.INTERRUPTED;
            default -> throw new IllegalStateException("futex wait failed: errno " + errno);
        };
    }

    /** Wakes up to {@code count} sleepers on the int at {@code offset}; returns how many woke. */
    public static int wake(MemorySegment segment, long offset, int count) {
        long result = Libc.futex(segment.asSlice(offset, 4), FUTEX_WAKE, count, -1);
        if (result < 0) {
            throw new IllegalStateException("futex wake failed: errno " + -result);
        }
        return (int) result;
    }

    /** Wakes every sleeper on the int at {@code offset}. */
    public static void wakeAll(MemorySegment segment, long offset) {
        wake(segment, offset, Integer.MAX_VALUE);
    }
}
