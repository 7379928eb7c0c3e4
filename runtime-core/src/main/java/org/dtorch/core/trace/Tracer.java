package org.dtorch.core.trace;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.dtorch.core.trace.TraceEvent.Kind;

/**
 * The process's timeline recorder (docs/observability.md). Off by default; {@link #start()} opens a session,
 * {@link #stop()} closes it and returns what it recorded as a {@link Trace}.
 *
 * <p>Call sites take a start time with {@link #now()}, which is 0 while the tracer is off, and pass it to a recording
 * method, which returns at once on 0. So when off a call site costs one read of a volatile field and a branch: no
 * allocation, no lambda, no varargs, no clock read. When on, an event is a few array slots of the calling thread's own
 * buffer (no lock, no contention, no object per event); the buffers are merged at {@link #stop()}.
 *
 * <p>Every thread's events land in a process row: the host's ({@link #HOST_PID}, the client and the controller) unless
 * the thread called {@link #nameThisThread} (a device's worker names its thread once, at start).
 *
 * <p>Thread-safe: recording from any thread; {@link #start()} and {@link #stop()} are serialized.
 */
public final class Tracer {
    /** The process row of threads that did not name one: the client's and the controller's. */
    public static final int HOST_PID = 0;

    /** A process row of the exported trace: its id and its name. Thread-safe: immutable. */
    record Row(int pid, String name) {
    }

    /** One recording: its clock origin, its threads' buffers and other processes' tracks. Thread-safe. */
    static final class Session {
        final long id;
        final long origin = System.nanoTime();
        final ConcurrentLinkedQueue<TraceBuffer> buffers = new ConcurrentLinkedQueue<>();
        final ConcurrentLinkedQueue<Trace.Track> parts = new ConcurrentLinkedQueue<>();
        /** What {@link #stop()} runs first: device timelines report the spans that completed ({@link StreamTimeline}). */
        final ConcurrentLinkedQueue<Runnable> flushes = new ConcurrentLinkedQueue<>();

        Session(long id) {
            this.id = id;
        }
    }

    /**
     * Processes that record for this process's sessions (a runtime's worker processes, in per-device-process mode),
     * told when a session opens and closes.
     *
     * <p>Thread-safe: called under the tracer's lock, from the thread that starts or stops the session.
     */
    public interface Remote {
        /** A session opened: start recording there, in order with the work sent to them from now on. */
        void traceStarted();

        /**
         * The session closed: stop recording there once the work sent before has run, and return each process's events
         * as a part ({@link TracePart#encode}), within the remote's deadline.
         *
         * @throws IllegalStateException naming the processes whose events did not come
         */
        List<byte[]> traceStopped();
    }

    private static final Set<Remote> REMOTES = ConcurrentHashMap.newKeySet();
    private static final Row HOST_ROW = new Row(HOST_PID, "host (client, controller)");
    private static final ThreadLocal<Row> ROWS = new ThreadLocal<>();
    private static final ThreadLocal<TraceBuffer.Appender> APPENDERS = new ThreadLocal<>();
    /** Numbers the sessions; guarded by the class's monitor. */
    private static long sessions;
    /** The open session, or null while off. */
    private static volatile Session session;

    private Tracer() {
    }

    /** True while a session records. */
    public static boolean enabled() {
        return session != null;
    }

    /** The process row the calling thread's events go to. */
    static Row rowOfThisThread() {
        Row row = ROWS.get();
        return row == null ? HOST_ROW : row;
    }

    /** The open session, or null while off. */
    static Session current() {
        return session;
    }

    /** A start time for a recording method: {@link System#nanoTime()}, or 0 while the tracer is off. */
    public static long now() {
        return session != null ? System.nanoTime() : 0;
    }

    /**
     * Puts the calling thread's events in process row {@code pid} named {@code processName} (a device's worker, once,
     * before its first event); costs one thread-local write whether the tracer is on or off.
     */
    public static void nameThisThread(int pid, String processName) {
        ROWS.set(new Row(pid, processName));
    }

    /** Tells {@code remote} when sessions open and close, until {@link #unregister}. */
    public static void register(Remote remote) {
        REMOTES.add(remote);
    }

    /** Stops telling {@code remote} about sessions. */
    public static void unregister(Remote remote) {
        REMOTES.remove(remote);
    }

    /**
     * Opens a session, and tells the registered {@link Remote}s.
     *
     * @throws IllegalStateException if one is already open (one recording per process at a time)
     */
    public static synchronized void start() {
        if (session != null) {
            throw new IllegalStateException("Tracer.start: a trace is already being recorded in this process; stop it first");
        }
        session = new Session(++sessions);
        REMOTES.forEach(Remote::traceStarted);
    }

    /**
     * Closes the session and returns what it recorded, with the events of the registered {@link Remote}s (waited for
     * within their deadlines). An event a thread records while this runs may be left out.
     *
     * @throws IllegalStateException if no session is open, or (the session closed all the same) if a remote's events
     *                               did not come: its message names the processes
     */
    public static synchronized Trace stop() {
        Session s = session;
        if (s == null) {
            throw new IllegalStateException("Tracer.stop: no trace is being recorded (start one first)");
        }
        s.flushes.forEach(Runnable::run);
        session = null;
        List<Trace.Track> tracks = new ArrayList<>();
        for (TraceBuffer buffer : s.buffers) {
            List<TraceEvent> events = new ArrayList<>();
            buffer.drainTo(events);
            tracks.add(new Trace.Track(buffer.row, buffer.tid, buffer.threadName, events));
        }
        tracks.addAll(s.parts);
        RuntimeException failed = null;
        for (Remote remote : REMOTES) {
            try {
                for (byte[] part : remote.traceStopped()) {
                    tracks.addAll(TracePart.decode(part, "a worker's trace events"));
                }
            } catch (IOException | RuntimeException e) {
                RuntimeException error = e instanceof RuntimeException r ? r : new IllegalStateException("Tracer.stop: " + e, e);
                if (failed == null) {
                    failed = error;
                } else {
                    failed.addSuppressed(error);
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
        return new Trace(s.origin, tracks);
    }

    /**
     * Adds the tracks of a worker process's part ({@link TracePart}) to the open session, their times moved to this
     * process's clock, less the events that started before the session (a part the worker began for an earlier one);
     * nothing when no session is open.
     *
     * @throws IOException if the part cannot be read (the session is left as it was)
     */
    public static void addPart(Path file) throws IOException {
        Session s = session;
        if (s != null) {
            for (Trace.Track track : TracePart.read(file)) {
                List<TraceEvent> events = track.events().stream().filter(e -> e.start() - s.origin >= 0).toList();
                s.parts.add(new Trace.Track(track.row(), track.tid(), track.threadName(), events));
            }
        }
    }

    /**
     * Client: operator {@code opId} ({@code name}, outputs described by {@code outputMetas}, run on {@code devices}) was
     * enqueued from {@code start} to now.
     */
    public static void enqueue(long opId, String name, List<?> outputMetas, List<Long> devices, long start) {
        if (start != 0) {
            record(Kind.ENQUEUE, name, start, System.nanoTime(), opId, 0, outputMetas, devices, null);
        }
    }

    /** Controller: operator {@code opId} was dispatched to its devices from {@code start} to now. */
    public static void dispatch(long opId, String name, long start) {
        if (start != 0) {
            record(Kind.DISPATCH, name, start, System.nanoTime(), opId, 0, null, null, null);
        }
    }

    /**
     * Worker: the kernel of operator {@code opId} ran on device {@code deviceId} from {@code start} to now, in host
     * time (on CUDA its launch; its device time comes from a {@link StreamTimeline}).
     */
    public static void kernel(long opId, String name, long deviceId, long start) {
        if (start != 0) {
            record(Kind.KERNEL, name, start, System.nanoTime(), opId, deviceId, null, null, null);
        }
    }

    /**
     * Worker: collective {@code op} of {@code kind} on {@code backend}, over the devices {@code group}, ran from
     * {@code start} to now; this rank contributed {@code bytes}.
     */
    public static void collective(String op, Object kind, String backend, long bytes, List<Long> group, long start) {
        if (start != 0) {
            record(Kind.COLLECTIVE, op, start, System.nanoTime(), 0, bytes, kind, group, backend);
        }
    }

    /** A store call {@code call} waited for {@code key} from {@code start} to now. */
    public static void storeWait(String call, String key, long start) {
        if (start != 0) {
            record(Kind.STORE_WAIT, call, start, System.nanoTime(), 0, 0, key, null, null);
        }
    }

    /**
     * A control frame ({@code name}: its type and direction) to or from {@code peer}, the {@code seq}-th of its type and
     * direction on that channel, of {@code bytes} bytes, passed now (an instant); nothing while off.
     */
    public static void controlFrame(String name, String peer, long seq, long bytes) {
        if (session != null) {
            long t = System.nanoTime();
            record(Kind.CONTROL, name, t, t, seq, bytes, peer, null, null);
        }
    }

    /** A promise named {@code name} completed now (an instant); nothing while off. */
    public static void promiseCompleted(String name) {
        if (session != null) {
            long t = System.nanoTime();
            record(Kind.PROMISE, name, t, t, 0, 0, null, null, null);
        }
    }

    private static void record(Kind kind, String name, long start, long end, long id, long count, Object a, Object b, Object c) {
        Session s = session;
        if (s == null || start - s.origin < 0) {
            return; // stopped since the start time was taken, or taken in an earlier session
        }
        TraceBuffer.Appender appender = APPENDERS.get();
        if (appender == null || appender.session != s.id) {
            TraceBuffer buffer = new TraceBuffer(rowOfThisThread(), Thread.currentThread());
            s.buffers.add(buffer);
            appender = buffer.appender(s.id);
            APPENDERS.set(appender);
        }
        appender.add(kind, name, start, end, id, count, a, b, c);
    }
}
