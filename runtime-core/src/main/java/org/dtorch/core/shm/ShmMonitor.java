package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;

/**
 * A mutex and a "something changed" condition that live in shared memory and work across processes:
 * the interprocess mutex and condition of DTorch's File backends, on Linux futexes.
 *
 * <pre>
 *   offset  size  field
 *   0       4     lock      0 free; else the holder's pid, bit 31 set when someone sleeps on it
 *   4       4     sequence  incremented by every {@link #signalAll()}; the condition's futex word
 *   8       4     sleepers  threads asleep on {@code sequence}
 *   12      4     (unused)
 * </pre>
 *
 * <p>Waiting costs no CPU: a waiter spins for a short budget (a hand-off between two running processes
 * then takes microseconds), then sleeps in the kernel until a signal or the end of its slice. The
 * signaller pays for a {@code futex} wake only when someone sleeps. Lost wake-ups cannot happen: a
 * waiter registers as sleeper before it re-reads the sequence, and the signaller bumps the sequence
 * before it reads the sleeper count (both are full fences).
 *
 * <p>A process killed while it holds the lock would leave it held for ever; a waiter that finds the
 * lock held longer than a slice checks the holder's pid and takes the lock over when that process is
 * gone. Critical sections only copy a few words, so what a dead holder leaves behind is at worst one
 * half-updated entry.
 *
 * <p>Thread-safe: any thread of any process that maps the words may call any method; {@link #unlock()}
 * and {@link #signalAll()} only by the holder.
 */
public final class ShmMonitor {
    /** Bytes the monitor occupies. */
    public static final int SIZE = 16;

    private static final int LOCK = 0;
    private static final int SEQUENCE = 4;
    private static final int SLEEPERS = 8;
    private static final int WAITERS_BIT = 0x8000_0000;
    private static final int LOCK_SPINS = 2_000;
    private static final long LOCK_SLICE_NANOS = 10_000_000L;

    private final MemorySegment segment;
    private final long base;
    private final int pid = Processes.currentPid();
    /** Set by {@link #signalAll()} when it woke someone; read and cleared by the holder in {@link #unlock()}. Guarded by the lock. */
    private boolean wokeSleepers;

    /** The monitor whose words start at {@code base} of {@code segment} (4-byte aligned). */
    public ShmMonitor(MemorySegment segment, long base) {
        if (base % 4 != 0) {
            throw new IllegalArgumentException("monitor offset must be 4-byte aligned, got " + base);
        }
        this.segment = segment;
        this.base = base;
    }

    /** Takes the lock, sleeping while another thread holds it. */
    public void lock() {
        long lockWord = base + LOCK;
        if (Shm.casInt(segment, lockWord, 0, pid)) {
            return;
        }
        for (int i = 0; i < LOCK_SPINS; i++) {
            Thread.onSpinWait();
            if (Shm.getIntVolatile(segment, lockWord) == 0 && Shm.casInt(segment, lockWord, 0, pid)) {
                return;
            }
        }
        while (true) {
            int held = Shm.getIntVolatile(segment, lockWord);
            if (held == 0) {
                // We were contended, so others may sleep too: keep the waiters bit on for their wake-up.
                if (Shm.casInt(segment, lockWord, 0, pid | WAITERS_BIT)) {
                    return;
                }
                continue;
            }
            int marked = held | WAITERS_BIT;
            if (held != marked && !Shm.casInt(segment, lockWord, held, marked)) {
                continue;
            }
            if (Futex.await(segment, lockWord, marked, LOCK_SLICE_NANOS) == Futex.Wake.TIMED_OUT) {
                int holder = marked & ~WAITERS_BIT;
                if (!Processes.isAlive(holder) && Shm.casInt(segment, lockWord, marked, pid | WAITERS_BIT)) {
                    return; // the holder died inside its critical section
                }
            }
        }
    }

    /**
     * Releases the lock, waking one sleeper if there is one. If {@link #signalAll()} woke sleepers while the
     * lock was held, gives the CPU up once: the scheduler tends to put a woken thread on the waker's CPU, where
     * it would wait until the waker blocks.
     */
    public void unlock() {
        boolean yield = wokeSleepers;
        wokeSleepers = false;
        int previous = Shm.getAndSetInt(segment, base + LOCK, 0);
        if ((previous & WAITERS_BIT) != 0) {
            Futex.wake(segment, base + LOCK, 1);
        }
        if (yield) {
            Thread.yield();
        }
    }

    /** Tells every waiter that the state changed. Call with the lock held. */
    public void signalAll() {
        Shm.getAndAddInt(segment, base + SEQUENCE, 1);
        if (Shm.getIntVolatile(segment, base + SLEEPERS) > 0) {
            Futex.wakeAll(segment, base + SEQUENCE);
            wokeSleepers = true;
        }
    }

    /** The change sequence; read it with the lock held and pass it to {@link #awaitChange}. */
    public int sequence() {
        return Shm.getIntVolatile(segment, base + SEQUENCE);
    }

    /**
     * With the lock held: releases it, waits until the sequence moves past {@code seen} (spinning until
     * {@code spinUntilNanos}, then sleeping at most {@code sleepNanos}), and takes the lock again. Returns
     * early and spuriously; callers re-check their condition in a loop with their own deadline.
     */
    public void awaitChange(int seen, long spinUntilNanos, long sleepNanos) {
        long sequence = base + SEQUENCE;
        unlock();
        try {
            while (System.nanoTime() - spinUntilNanos < 0) {
                if (Shm.getIntVolatile(segment, sequence) != seen) {
                    return;
                }
                Thread.onSpinWait();
            }
            Shm.getAndAddInt(segment, base + SLEEPERS, 1);
            try {
                if (Shm.getIntVolatile(segment, sequence) == seen && sleepNanos > 0) {
                    Futex.await(segment, sequence, seen, sleepNanos);
                }
            } finally {
                Shm.getAndAddInt(segment, base + SLEEPERS, -1);
            }
        } finally {
            lock();
        }
    }
}
