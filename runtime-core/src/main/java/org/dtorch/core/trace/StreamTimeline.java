package org.dtorch.core.trace;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The device time of the kernels (or of the collectives) of one stream, as a track of its device's row: each traced
 * kernel is bracketed by a pair of events recorded on the stream ({@link #begin}, {@link #end}), and once the pair
 * completed its device span is recorded (docs/observability.md, "CUDA").
 *
 * <p>Nothing waits for the device: completed pairs are reported, in stream order, when the worker begins its next
 * traced kernel, after each one ends, and when the tracer stops ({@link Tracer#stop()} asks every timeline that began a
 * kernel in its session). A pair still running then is not in that trace (nor in a later one, which it began
 * before); {@link #close()} waits a little for the pairs in flight and reports them.
 *
 * <p><b>The clock.</b> Events give device intervals, not host times, so each span is placed on the host clock by a
 * chain: a kernel's device start is the later of (a) its host start (its start event was recorded after it, so it
 * cannot run earlier) and (b) the previous span's placed end plus the device interval from the previous end event to
 * this start event. Both are lower bounds of the true start; (b) carries the exact device gaps along a busy stream,
 * and (a) brings the chain back to the truth whenever the stream was idle when a kernel was issued (the start event
 * then runs within a launch's latency). So spans never overlap, keep their exact device durations, and start no later
 * than they truly did.
 *
 * <p>Event pairs are pooled: a pair goes back to the pool once its successor's span was placed (its end event anchors
 * that successor), so a steady run creates none. At most {@link #MAX_IN_FLIGHT} pairs are in flight; a kernel issued
 * beyond that is not timed ({@link #untimed()} counts them).
 *
 * <p>Thread-safe: the worker's thread begins and ends kernels, and the tracer's {@code stop()} may flush from another
 * thread; the methods are serialized.
 */
public final class StreamTimeline implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(StreamTimeline.class.getName());
    /** Pairs in flight at most; beyond them kernels go untimed rather than the pool growing without bound. */
    public static final int MAX_IN_FLIGHT = 1024;
    /** How long {@link #close()} waits, in all, for the pairs in flight while a recording is open. */
    public static final Duration CLOSE_WAIT = Duration.ofSeconds(10);
    /** Track ids of kernel timelines: this plus the device id, clear of Java thread ids (the other tracks' ids). */
    public static final long TRACK_ID_BASE = 1_000_000_000L;
    /** Track ids of collective timelines: this plus the device id. */
    public static final long COLLECTIVE_TRACK_ID_BASE = TRACK_ID_BASE + 1_000_000L;

    /** The worker thread's timeline of collectives, which {@code ThreadGroup} finds without a reference to the runner. */
    private static final ThreadLocal<StreamTimeline> COLLECTIVES = new ThreadLocal<>();

    /** What a timeline's spans are: its events' kind and its track. */
    public enum Subject {
        /** The operators' kernels: {@code "<stream> (device time)"}, track {@link #TRACK_ID_BASE} plus the device id. */
        KERNELS(TraceEvent.Kind.DEVICE_KERNEL, TRACK_ID_BASE, " (device time)"),
        /**
         * The collectives the kernels ran, from the worker's stream: {@code "<stream>, collectives (device time)"}, track
         * {@link #COLLECTIVE_TRACK_ID_BASE} plus the device id. A collective runs inside its kernel's span, so it needs a
         * timeline of its own: the placement chain assumes the spans of one timeline disjoint.
         */
        COLLECTIVES(TraceEvent.Kind.DEVICE_COLLECTIVE, COLLECTIVE_TRACK_ID_BASE, ", collectives (device time)");

        final TraceEvent.Kind kind;
        final long trackBase;
        final String trackSuffix;

        Subject(TraceEvent.Kind kind, long trackBase, String trackSuffix) {
            this.kind = kind;
            this.trackBase = trackBase;
            this.trackSuffix = trackSuffix;
        }
    }

    /**
     * Two events of one stream around a span of work (on CUDA, {@code DeviceEvent.createTimed} twice).
     *
     * <p>Not thread-safe: used under its timeline's lock.
     */
    public interface EventPair extends AutoCloseable {
        /** Records the start event on the stream. */
        void recordStart();

        /** Records the end event on the stream. */
        void recordEnd();

        /** True once the stream passed the end event. */
        boolean ended();

        /** Device nanoseconds from the start event to the end event, both completed. */
        long durationNanos();

        /** Device nanoseconds from {@code previous}'s end event to this start event, both completed. */
        long nanosAfter(EventPair previous);

        /** Waits for the end event at most {@code timeout}; false when it did not pass by then (or the wait failed). */
        boolean awaitEnd(Duration timeout);

        /** Destroys the events. */
        @Override
        void close();
    }

    /**
     * A kernel in flight: its pair and what its span will say. Reused with its pair.
     *
     * <p>Not thread-safe: read and written under its timeline's lock.
     */
    public static final class Span {
        private final EventPair events;
        private long opId;
        private String name;
        private long hostStart;

        private Span(EventPair events) {
            this.events = events;
        }
    }

    private final Supplier<EventPair> factory;
    private final long deviceId;
    private final TraceEvent.Kind kind;
    private final Tracer.Row row;
    private final long tid;
    private final String trackName;
    private final ArrayDeque<Span> free = new ArrayDeque<>();
    private final ArrayDeque<Span> inFlight = new ArrayDeque<>();
    /** The last span placed, whose end event anchors the next one; null before the first. */
    private Span previous;
    private long previousEnd;
    private long created;
    private long untimed;
    /** The last session this timeline asked to flush it at {@link Tracer#stop()}. */
    private long flushSession;
    /** The writing end of this timeline's buffer in the session it last recorded in. */
    private TraceBuffer.Appender appender;
    private boolean closed;

    /**
     * A timeline of {@code subject} for device {@code deviceId}, on a track named after {@code streamName} in the process
     * row of the calling thread (a worker creates it after {@link Tracer#nameThisThread}); its pairs come from
     * {@code factory}.
     */
    public StreamTimeline(Supplier<EventPair> factory, long deviceId, String streamName, Subject subject) {
        this.factory = Objects.requireNonNull(factory, "factory");
        this.deviceId = deviceId;
        this.kind = subject.kind;
        this.row = Tracer.rowOfThisThread();
        this.tid = subject.trackBase + deviceId;
        this.trackName = Objects.requireNonNull(streamName, "streamName") + subject.trackSuffix;
    }

    /** Makes {@code timeline} (of {@link Subject#COLLECTIVES}; null: none) the calling worker thread's timeline of collectives. */
    public static void bindCollectivesToThisThread(StreamTimeline timeline) {
        COLLECTIVES.set(timeline);
    }

    /** The calling thread's timeline of collectives, or null when it is not a CUDA worker's. */
    public static StreamTimeline collectivesOfThisThread() {
        return COLLECTIVES.get();
    }

    /**
     * Reports the spans that completed, then records the start event of a kernel issued at {@code hostStart} (a
     * {@link Tracer#now()} that is not 0); null when {@link #MAX_IN_FLIGHT} pairs are in flight (the kernel goes
     * untimed).
     */
    public synchronized Span begin(long hostStart) {
        ensureOpen();
        poll();
        Tracer.Session s = Tracer.current();
        if (s != null && flushSession != s.id) {
            flushSession = s.id;
            s.flushes.add(this::flush);
        }
        if (inFlight.size() >= MAX_IN_FLIGHT) {
            untimed++;
            return null;
        }
        Span span = free.pollFirst();
        if (span == null) {
            span = new Span(factory.get());
            created++;
        }
        span.hostStart = hostStart;
        span.events.recordStart();
        return span;
    }

    /** Records the end event of {@code span} (from {@link #begin}; nothing for null), then reports what completed. */
    public synchronized void end(Span span, long opId, String name) {
        if (span == null) {
            return;
        }
        span.opId = opId;
        span.name = name;
        span.events.recordEnd();
        inFlight.addLast(span);
        poll();
    }

    /** Reports the spans that completed, without waiting; what {@link Tracer#stop()} runs. */
    public synchronized void flush() {
        if (!closed) {
            poll();
        }
    }

    /** Pairs created so far: the pool's size. */
    public synchronized long pairsCreated() {
        return created;
    }

    /** Kernels not timed because {@link #MAX_IN_FLIGHT} pairs were in flight. */
    public synchronized long untimed() {
        return untimed;
    }

    /**
     * Reports the pairs in flight, waiting for them at most {@link #CLOSE_WAIT} in all and only while a recording is
     * open (a device that does not finish loses its last spans, not the worker's end), then destroys every pair (CUDA
     * releases an event still pending once it completes). Never throws: tracing does not fail a worker's end. Idempotent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        try {
            if (Tracer.enabled()) {
                awaitInFlight();
            }
            poll();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "the device spans of " + trackName + " still in flight are dropped", e);
        } finally {
            closed = true;
            inFlight.forEach(span -> span.events.close());
            free.forEach(span -> span.events.close());
            if (previous != null) {
                previous.events.close();
            }
            inFlight.clear();
            free.clear();
            previous = null;
        }
    }

    private void awaitInFlight() {
        long deadline = System.nanoTime() + CLOSE_WAIT.toNanos();
        for (Span span : inFlight) {
            long left = deadline - System.nanoTime();
            if (left <= 0 || !span.events.awaitEnd(Duration.ofNanos(left))) {
                return;
            }
        }
    }

    private void poll() {
        Span head;
        while ((head = inFlight.peekFirst()) != null && head.events.ended()) {
            inFlight.pollFirst();
            place(head);
        }
    }

    /** Places {@code span} on the host clock (see the class comment), records it, and recycles its predecessor. */
    private void place(Span span) {
        long start = span.hostStart;
        if (previous != null) {
            start = Math.max(start, previousEnd + Math.max(0, span.events.nanosAfter(previous.events)));
            free.addFirst(previous);
        }
        long end = start + Math.max(0, span.events.durationNanos());
        record(span, start, end);
        previous = span;
        previousEnd = end;
        span.name = null;
    }

    private void record(Span span, long start, long end) {
        Tracer.Session s = Tracer.current();
        if (s == null || span.hostStart - s.origin < 0) {
            return; // no recording now, or the kernel was issued before this one began
        }
        if (appender == null || appender.session != s.id) {
            TraceBuffer buffer = new TraceBuffer(row, tid, trackName);
            s.buffers.add(buffer);
            appender = buffer.appender(s.id);
        }
        appender.add(kind, span.name, start, end, span.opId, deviceId, null, null, null);
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("the stream timeline of device " + deviceId + " is closed");
        }
    }
}
