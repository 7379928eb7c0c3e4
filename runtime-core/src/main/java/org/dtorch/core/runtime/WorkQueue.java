package org.dtorch.core.runtime;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.dtorch.core.graph.PipelineStages;

/**
 * A many-producer, one-consumer queue that hands its consumer everything queued in one go.
 * Producers append to one list under a short lock; the consumer swaps that list for its own emptied one and
 * works through the batch without the lock, so a busy pipeline pays no allocation per item (no linked node) and
 * one lock hand-over per batch instead of a compare-and-set per item, and the consumer reads its items from one
 * array in order rather than chasing a node per item made on another core.
 *
 * <p>A consumer that finds nothing backs off in three steps: a few spins, then yielding the CPU (so a producer
 * that shares the core keeps running), then parking; producers wake it only when it is parked, so a busy pipeline
 * pays no system call per item. On a machine with fewer cores than busy threads, spinning would take the CPU
 * from the very producer being waited for.
 *
 * <p>Memory ordering: a producer appends and stores {@code queued} (volatile) inside the lock; the consumer spins
 * on {@code queued} with acquire reads and takes the lock only once it saw something. A parking consumer publishes
 * itself in {@code parked} (volatile) and then reads {@code queued} (volatile); a producer stores {@code queued} and
 * then reads {@code parked}: each pair is a store then a load of volatiles, so one of them always sees the other.
 *
 * <p>Thread-safe: any thread may {@link #offer}; one thread calls {@link #poll} and {@link #take}, and uses each
 * batch only until its next call.
 */
final class WorkQueue<T> {
    private static final int SPINS = 100;
    private static final long YIELD_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    private static final long PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final VarHandle QUEUED;

    static {
        try {
            QUEUED = MethodHandles.lookup().findVarHandle(WorkQueue.class, "queued", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Object lock = new Object();
    /** Items offered and not yet taken; guarded by {@link #lock}. */
    private ArrayList<T> incoming = new ArrayList<>();
    /** The size of {@link #incoming}, for the consumer's look without the lock; written under the lock. */
    @SuppressWarnings("unused")
    private int queued;
    /** The consumer's current batch; only the consumer touches it outside the swap. */
    private ArrayList<T> batch = new ArrayList<>();
    private volatile Thread parked;

    void offer(T item) {
        synchronized (lock) {
            incoming.add(item);
            // Volatile, not release: the read of parked below must not pass it (see the class comment).
            QUEUED.setVolatile(this, incoming.size());
        }
        Thread consumer = parked;
        if (consumer != null) {
            LockSupport.unpark(consumer);
        }
    }

    /**
     * Everything queued, in order, or an empty list at once if there is none. The list is the consumer's until
     * its next {@code poll} or {@code take}, which clears it.
     */
    List<T> poll() {
        batch.clear();
        if ((int) QUEUED.getAcquire(this) == 0) {
            return batch;
        }
        return swap();
    }

    private List<T> swap() {
        ArrayList<T> emptied = batch;
        synchronized (lock) {
            batch = incoming;
            incoming = emptied;
            QUEUED.setRelease(this, 0);
        }
        return batch;
    }

    /** Everything queued, waiting as long as it takes for something; an interrupt returns an empty list. */
    List<T> take() {
        return take(Long.MAX_VALUE);
    }

    /**
     * Everything queued, waiting at most about {@code maxWaitNanos} for something; an empty list at the deadline
     * or on an interrupt.
     */
    List<T> take(long maxWaitNanos) {
        List<T> items = poll();
        if (!items.isEmpty()) {
            return items;
        }
        long deadline = maxWaitNanos == Long.MAX_VALUE ? Long.MAX_VALUE : System.nanoTime() + maxWaitNanos;
        for (int i = 0; i < SPINS; i++) {
            Thread.onSpinWait();
            if ((int) QUEUED.getAcquire(this) != 0) {
                return swap();
            }
        }
        long yieldEnd = Math.min(System.nanoTime() + YIELD_NANOS, deadline);
        while (System.nanoTime() - yieldEnd < 0) {
            Thread.yield();
            if ((int) QUEUED.getAcquire(this) != 0) {
                return swap();
            }
        }
        Thread self = Thread.currentThread();
        while (true) {
            long left = deadline == Long.MAX_VALUE ? PARK_NANOS : deadline - System.nanoTime();
            if (left <= 0) {
                return poll();
            }
            parked = self;
            if ((int) QUEUED.getVolatile(this) != 0) {
                parked = null;
                return swap();
            }
            PipelineStages.parked();
            LockSupport.parkNanos(this, Math.min(PARK_NANOS, left));
            parked = null;
            if ((int) QUEUED.getAcquire(this) != 0) {
                return swap();
            }
            if (self.isInterrupted()) {
                return batch;
            }
        }
    }
}
