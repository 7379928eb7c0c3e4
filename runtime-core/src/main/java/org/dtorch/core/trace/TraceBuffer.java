package org.dtorch.core.trace;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The events of one thread in one session: a chain of fixed-size chunks its thread appends to without a lock, and
 * that {@link Tracer#stop()} reads from another thread. The session holds every buffer it registered, so the events
 * of a thread that ended are still exported.
 *
 * <p>An event is written into its slot first, then published by a release-write of the chunk's count
 * ({@code lazySet}); the reader acquires the count and reads only the slots below it. A full chunk's successor is
 * published the same way.
 *
 * <p>Thread-safe for one writer (the owning thread) and any number of readers.
 */
final class TraceBuffer {
    private static final int CHUNK = 1024;

    private static final class Chunk {
        final TraceEvent[] events = new TraceEvent[CHUNK];
        final AtomicInteger count = new AtomicInteger();
        final AtomicReference<Chunk> next = new AtomicReference<>();
    }

    /** The session this buffer belongs to; a thread whose buffer is from an older session registers a new one. */
    final Tracer.Session session;
    final Tracer.Row row;
    final long tid;
    final String threadName;
    private final Chunk head = new Chunk();
    /** The chunk being filled; the owning thread's alone. */
    private Chunk tail = head;
    private int tailCount;

    TraceBuffer(Tracer.Session session, Tracer.Row row, Thread thread) {
        this.session = session;
        this.row = row;
        this.tid = thread.threadId();
        this.threadName = thread.getName();
    }

    /** Appends {@code event}; owning thread only. */
    void add(TraceEvent event) {
        if (tailCount == CHUNK) {
            Chunk next = new Chunk();
            tail.next.lazySet(next);
            tail = next;
            tailCount = 0;
        }
        tail.events[tailCount] = event;
        tail.count.lazySet(++tailCount);
    }

    /** Adds the events published so far to {@code out}, in recording order; any thread. */
    void drainTo(List<TraceEvent> out) {
        for (Chunk c = head; c != null; c = c.next.getAcquire()) {
            int n = c.count.getAcquire();
            for (int i = 0; i < n; i++) {
                out.add(c.events[i]);
            }
        }
    }
}
