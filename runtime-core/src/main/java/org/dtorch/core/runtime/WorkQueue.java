package org.dtorch.core.runtime;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A many-producer, one-consumer queue whose consumer spins briefly and then parks, and whose producers
 * wake it only when it is parked, so a busy pipeline pays no system call per item.
 *
 * <p>Thread-safe: any thread may {@link #offer}; one thread calls {@link #take}.
 */
final class WorkQueue<T> {
    private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
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

    /** The next item, waiting as long as it takes; an interrupt returns null. */
    T take() {
        T item = items.poll();
        if (item != null) {
            return item;
        }
        long spinEnd = System.nanoTime() + SPIN_NANOS;
        while (System.nanoTime() - spinEnd < 0) {
            item = items.poll();
            if (item != null) {
                return item;
            }
            Thread.onSpinWait();
        }
        Thread self = Thread.currentThread();
        while (true) {
            parked = self;
            item = items.poll();
            if (item != null) {
                parked = null;
                return item;
            }
            LockSupport.parkNanos(this, PARK_NANOS);
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
