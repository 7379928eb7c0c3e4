package org.dtorch.core.communication.store;

import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.shm.ShmMonitor;

/**
 * How a {@link FileTensorStore} call waits: on the control region's monitor for a change ({@link Waiter}), or on
 * the host for a CUDA event ({@link #awaitOnHost}). Either spins for the spin budget first, then sleeps (in
 * slices of the monitor's futex, or polls for an event), and between sleeps checks the deadline, interruption,
 * that the store is still open, and every {@value #PEER_CHECK_MILLIS} ms that no participant died
 * ({@link FileStorePeers#checkAlive}). A timeout or an interrupt names the call and what it saw so far.
 *
 * <p>Thread-safe: stateless past construction; a {@link Waiter} belongs to one call.
 */
final class FileStoreWait {
    /** How often a wait checks that every open participant's process is alive. */
    static final long PEER_CHECK_MILLIS = 250;
    /** How often a host wait for a CUDA event polls once its spin budget is spent. */
    static final long EVENT_POLL_MICROS = 20;
    private static final long SLEEP_SLICE_NANOS = 250_000_000L;

    private final ShmMonitor monitor;
    private final FileStorePeers peers;
    private final long spinNanos;
    private final Consumer<String> ensureOpen;

    /** {@code ensureOpen} throws, naming the call, once the store is closed. */
    FileStoreWait(ShmMonitor monitor, FileStorePeers peers, long spinNanos, Consumer<String> ensureOpen) {
        this.monitor = monitor;
        this.peers = peers;
        this.spinNanos = spinNanos;
        this.ensureOpen = ensureOpen;
    }

    /** A wait of the call {@code op}, failing at {@code deadline}; its spin budget starts now. */
    Waiter waiter(String op, Deadline deadline) {
        return new Waiter(op, deadline);
    }

    /**
     * One wait of one call: spins for the spin budget, then sleeps in slices; between slices checks the
     * deadline, interruption, and (every {@value #PEER_CHECK_MILLIS} ms) that no participant died.
     * Called with the monitor's lock held; returns with it held.
     */
    final class Waiter {
        private final String op;
        private final Deadline deadline;
        private final long spinUntil;
        private long nextPeerCheck;

        private Waiter(String op, Deadline deadline) {
            this.op = op;
            this.deadline = deadline;
            this.spinUntil = System.nanoTime() + spinNanos;
            this.nextPeerCheck = System.nanoTime() + PEER_CHECK_MILLIS * 1_000_000L;
        }

        /** Waits for one change of the monitor (or a slice); {@code seen} describes what was awaited, for errors. */
        void step(Supplier<String> seen) {
            failIfOver(op, deadline, seen);
            long remaining = deadline.remainingNanos();
            long now = System.nanoTime();
            if (now - nextPeerCheck >= 0) {
                nextPeerCheck = now + PEER_CHECK_MILLIS * 1_000_000L;
                peers.checkAlive(op, seen);
            }
            monitor.awaitChange(monitor.sequence(), spinUntil, Math.max(1, Math.min(remaining, SLEEP_SLICE_NANOS)));
            ensureOpen.accept(op);
        }
    }

    /**
     * Waits on the host until {@code event} has passed: spins for the spin budget, then polls every
     * {@value #EVENT_POLL_MICROS} us; between polls checks the deadline, interruption, and (every
     * {@value #PEER_CHECK_MILLIS} ms, taking the monitor's lock) that no participant died, since a killed
     * producer's event may never pass. Called without the monitor's lock.
     */
    void awaitOnHost(String op, DeviceEvent event, Deadline deadline, Supplier<String> seen) {
        long spinUntil = System.nanoTime() + spinNanos;
        long nextPeerCheck = System.nanoTime() + PEER_CHECK_MILLIS * 1_000_000L;
        while (!event.query()) {
            failIfOver(op, deadline, seen);
            long now = System.nanoTime();
            if (now - nextPeerCheck >= 0) {
                nextPeerCheck = now + PEER_CHECK_MILLIS * 1_000_000L;
                monitor.lock();
                try {
                    ensureOpen.accept(op);
                    peers.checkAlive(op, seen);
                } finally {
                    monitor.unlock();
                }
            }
            if (now - spinUntil < 0) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(EVENT_POLL_MICROS * 1_000L);
            }
        }
    }

    /** Throws when {@code deadline} has passed or the calling thread was interrupted, naming what was awaited. */
    private static void failIfOver(String op, Deadline deadline, Supplier<String> seen) {
        if (deadline.expired()) {
            throw new CommTimeoutException(op + " " + deadline.timedOutAfter() + ": " + seen.get());
        }
        if (Thread.currentThread().isInterrupted()) {
            throw new CommInterruptedException(op + " was interrupted: " + seen.get(), new InterruptedException());
        }
    }
}
