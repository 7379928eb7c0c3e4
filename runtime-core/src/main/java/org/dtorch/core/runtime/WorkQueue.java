package org.dtorch.core.runtime;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.dtorch.core.graph.PipelineStages;

/**
 * A many-producer, one-consumer queue whose consumer backs off in three steps when it finds nothing: a few
 * spins, then yielding the CPU (so a producer that shares the core keeps running), then parking; producers
 * wake it only when it is parked, so a busy pipeline pays no system call per item. On a machine with fewer
 * cores than busy threads, spinning would take the CPU from the very producer being waited for.
 *
 * <p>Thread-safe: any thread may {@link #offer}; one thread calls {@link #take}.
 */
final class WorkQueue<T> {
    private static final int SPINS = 100;
    private static final long YIELD_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    private static final long PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final ConcurrentLinkedQueue<T> items = new ConcurrentLinkedQueue<>();
    private volatile Thread parked;

    void offer(T item) {
        items.offer(item);
        Thread consumer = parked;
        if (consumer != null) {
            LockSupport.unpark(consumer);
        }
    }

    /** The next item, or null at once if there is none. */
    T poll() {
        return items.poll();
    }

    /** The next item, waiting as long as it takes; an interrupt returns null. */
    T take() {
        return take(Long.MAX_VALUE);
    }

    /** The next item, waiting at most about {@code maxWaitNanos}; null at the deadline or on an interrupt. */
    T take(long maxWaitNanos) {
        long deadline = maxWaitNanos == Long.MAX_VALUE ? Long.MAX_VALUE : System.nanoTime() + maxWaitNanos;
        T item = items.poll();
        if (item != null) {
            return item;
        }
        for (int i = 0; i < SPINS; i++) {
            Thread.onSpinWait();
            item = items.poll();
            if (item != null) {
                return item;
            }
        }
        long yieldEnd = Math.min(System.nanoTime() + YIELD_NANOS, deadline);
        while (System.nanoTime() - yieldEnd < 0) {
            Thread.yield();
            item = items.poll();
            if (item != null) {
                return item;
            }
        }
        Thread self = Thread.currentThread();
        while (true) {
            long left = deadline == Long.MAX_VALUE ? PARK_NANOS : deadline - System.nanoTime();
            if (left <= 0) {
                return items.poll();
            }
            parked = self;
            item = items.poll();
            if (item != null) {
                parked = null;
                return item;
            }
            PipelineStages.parked();
            LockSupport.parkNanos(this, Math.min(PARK_NANOS, left));
            parked = null;
            item = items.poll();
            if (item != null) {
                return item;
            }
            if (self.isInterrupted()) {
                return null;
            }
        }
    }

    /** Removes and returns everything queued. */
    java.util.List<T> drain() {
        java.util.List<T> all = new java.util.ArrayList<>();
        for (T item; (item = items.poll()) != null; ) {
            all.add(item);
        }
        return all;
    }

    boolean isEmpty() {
        return items.isEmpty();
    }
}
