package org.dtorch.core.trace;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The events of one thread in one session: a chain of fixed-size chunks its thread appends to without a lock, and
 * that {@link Tracer#stop()} reads from another thread. The session holds every buffer it registered, so the events
 * of a thread that ended are still exported.
 *
 * <p>A chunk stores its events by column (primitive arrays for kinds, times and numbers, one array for references),
 * so recording allocates nothing per event and the collector copies a few arrays instead of tracing an object per
 * event; {@link #drainTo} makes the {@link TraceEvent}s.
 *
 * <p>An event is written into its slot first, then published by a release-write of the chunk's count
 * ({@code lazySet}); the reader acquires the count and reads only the slots below it. A full chunk's successor is
 * published the same way.
 *
 * <pre>
 *   slot i of a chunk:  kinds[i]   times[2i] = start, times[2i+1] = end   numbers[2i] = id, numbers[2i+1] = count
 *                       refs[4i] = name, refs[4i+1] = a, refs[4i+2] = b, refs[4i+3] = c
 * </pre>
 *
 * <p>Thread-safe for one writer (the owning thread, through its {@link Appender}) and any number of readers.
 */
final class TraceBuffer {
    private static final int CHUNK = 1024;
    private static final TraceEvent.Kind[] KINDS = TraceEvent.Kind.values();

    private static final class Chunk {
        final byte[] kinds = new byte[CHUNK];
        final long[] times = new long[2 * CHUNK];
        final long[] numbers = new long[2 * CHUNK];
        final Object[] refs = new Object[4 * CHUNK];
        final AtomicInteger count = new AtomicInteger();
        final AtomicReference<Chunk> next = new AtomicReference<>();
    }

    final Tracer.Row row;
    final long tid;
    final String threadName;
    private final Chunk head = new Chunk();

    TraceBuffer(Tracer.Row row, Thread thread) {
        this(row, thread.threadId(), thread.getName());
    }

    /** A buffer for a track that is not a thread's (a device stream's, {@link StreamTimeline}). */
    TraceBuffer(Tracer.Row row, long tid, String trackName) {
        this.row = row;
        this.tid = tid;
        this.threadName = trackName;
    }

    /** The owning thread's end of this buffer, for session {@code session}. */
    Appender appender(long session) {
        return new Appender(session, head);
    }

    /**
     * The writing end of a buffer, which the owning thread keeps: it holds only the chunk being filled (chunks link
     * forward), so once the session is over a thread that records no more keeps one chunk alive, not its whole trace.
     *
     * <p>Not thread-safe: the owning thread only.
     */
    static final class Appender {
        /** The session it writes for; a thread whose appender is from an older session registers a new buffer. */
        final long session;
        private Chunk tail;
        private int tailCount;

        private Appender(long session, Chunk head) {
            this.session = session;
            this.tail = head;
        }

        /** Appends one event (fields as in {@link TraceEvent}). */
        void add(TraceEvent.Kind kind, String name, long start, long end, long id, long count, Object a, Object b, Object c) {
            if (tailCount == CHUNK) {
                Chunk next = new Chunk();
                tail.next.lazySet(next);
                tail = next;
                tailCount = 0;
            }
            Chunk t = tail;
            int i = tailCount;
            t.kinds[i] = (byte) kind.ordinal();
            t.times[2 * i] = start;
            t.times[2 * i + 1] = end;
            t.numbers[2 * i] = id;
            t.numbers[2 * i + 1] = count;
            t.refs[4 * i] = name;
            t.refs[4 * i + 1] = a;
            t.refs[4 * i + 2] = b;
            t.refs[4 * i + 3] = c;
            t.count.lazySet(++tailCount);
        }
    }

    /** Adds the events published so far to {@code out}, in recording order; any thread. */
    void drainTo(List<TraceEvent> out) {
        for (Chunk c = head; c != null; c = c.next.getAcquire()) {
            int n = c.count.getAcquire();
            for (int i = 0; i < n; i++) {
                out.add(new TraceEvent(KINDS[c.kinds[i]], (String) c.refs[4 * i], c.times[2 * i], c.times[2 * i + 1],
                    c.numbers[2 * i], c.numbers[2 * i + 1], c.refs[4 * i + 1], c.refs[4 * i + 2], c.refs[4 * i + 3]));
            }
        }
    }
}
