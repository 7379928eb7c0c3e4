package org.dtorch.core.runtime.process;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.DeviceNode;

/**
 * The controller's handle on the worker process of one device (per-device-process mode): sends it
 * operators and releases over the {@link ControlChannel}, and on a reader thread takes its reports: which
 * operators it ran ({@code DONE}), which failed ({@code FAILED}), unrecoverable errors ({@code FATAL}), and the trace
 * a profiler window's stop asked for ({@code TRACE_EVENTS}).
 * The process is a child of this JVM or runs on another node ({@link WorkerLife}); its last lines of output go into
 * error messages.
 *
 * <p>Operators run in the order they were sent, so the ones sent and not yet reported are a queue. When the
 * process exits, the runtime hears of it through {@link Events#exited} (for a child, the JVM's process reaper calls back
 * within milliseconds of a SIGKILL; for a remote worker, its node agent or the loss of its node), and every operator
 * still queued here is abandoned.
 *
 * <p>Thread-safe: the controller thread sends; the reader thread and the exit callback take reports.
 */
final class WorkerProcess implements DeviceNode {
    private static final System.Logger LOG = System.getLogger(WorkerProcess.class.getName());
    private static final int FLUSH_BYTES = 32 * 1024;

    /** What the runtime hears from its workers. */
    interface Events {
        /** A kernel's promise failed on {@code worker}'s device (the worker reported the error's kind and text). */
        void operatorFailed(WorkerProcess worker, Operator op, FailureKind kind, String text);

        /** The worker process exited; {@code fatal} is what it reported before, if anything. */
        void exited(WorkerProcess worker, int status, String fatal);
    }

    private final Device device;
    private final WorkerLife process;
    private final LogicalGraph graph;
    private final OperatorEncoder encoder;
    private final Events events;
    private final Deque<Operator> inFlight = new ArrayDeque<>();
    private volatile ControlChannel channel;
    private volatile int liveBlobs;
    private volatile String fatal;
    private volatile boolean exited;
    private volatile boolean stopRequested;
    private volatile Throwable deadCause;
    private Thread reader;
    /** The trace asked for by the last {@code TRACE_STOP}, completed by its last {@code TRACE_EVENTS} or by the exit. */
    private volatile CompletableFuture<byte[]> trace = CompletableFuture.completedFuture(new byte[0]);
    /** The pieces of the trace being received; the reader thread's. */
    private final ByteArrayOutputStream tracePieces = new ByteArrayOutputStream();

    WorkerProcess(Device device, WorkerLife process, LogicalGraph graph, OperatorEncoder encoder, Events events) {
        this.device = device;
        this.process = process;
        this.graph = graph;
        this.encoder = encoder;
        this.events = events;
        process.onExit().thenRun(this::onExit);
    }

    Device device() {
        return device;
    }

    long pid() {
        return process.pid();
    }

    /** How the controller knows the process lives. */
    WorkerLife life() {
        return process;
    }

    /** Why it is gone when its whole node was lost, or null. */
    WorkerDiedException lost() {
        return process.lost();
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** The exit status, or -1 while the process runs. */
    int exitStatusNow() {
        return process.exitStatusNow();
    }

    boolean isAttached() {
        return channel != null;
    }

    /** Connects the channel the worker opened (after its HELLO). */
    void attach(ControlChannel connected) {
        this.channel = connected;
    }

    @Override
    public void start() {
        reader = Thread.ofPlatform().daemon().name("dtorch-worker-reader-" + device).start(this::readReports);
    }

    @Override
    public void submit(Operator op) {
        Throwable dead = deadCause;
        if (dead == null) {
            try {
                byte[] bytes = encoder.encode(op).bytes();
                synchronized (inFlight) {
                    inFlight.add(op);
                }
                channel.queue(ControlChannel.OPERATOR, bytes);
                if (channel.queuedBytes() >= FLUSH_BYTES) {
                    flush(); // a client that never pauses must not leave the worker idle behind a full buffer
                }
                return;
            } catch (RuntimeException e) {
                synchronized (inFlight) {
                    inFlight.remove(op);
                }
                dead = new IllegalStateException("operator " + op.label() + " could not be sent to " + device + ": " + e, e);
                LOG.log(System.Logger.Level.ERROR, dead.getMessage(), e);
            }
        }
        op.spec().abandon(dead);
        finished(op);
    }

    @Override
    public void submitRelease(Operand operand) {
        if (deadCause == null) {
            channel.queue(ControlChannel.RELEASE, new WireWriter().putLong(operand.id()).toByteArray());
        }
    }

    @Override
    public void flush() {
        ControlChannel c = channel;
        if (c == null || deadCause != null || !c.hasQueued()) {
            return;
        }
        try {
            c.flush();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot write to the worker of " + device + " (it is exiting?): " + e);
        }
    }

    @Override
    public void cancel(Throwable cause) {
        sendNow(ControlChannel.CANCEL, new WireWriter().putString(String.valueOf(cause.getMessage())).toByteArray());
    }

    @Override
    public void stop() {
        stopRequested = true;
        sendNow(ControlChannel.SHUTDOWN, new byte[0]);
        ControlChannel c = channel;
        if (c != null) {
            c.shutdownOutput(); // the worker's last read ends, and it need not linger for us
        }
    }

    private void sendNow(byte type, byte[] payload) {
        ControlChannel c = channel;
        if (c == null || exited) {
            return;
        }
        try {
            c.send(type, payload);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot write to the worker of " + device + ": " + e);
        }
    }

    @Override
    public boolean join(Duration timeout) throws InterruptedException {
        return process.waitFor(timeout);
    }

    /** Queues {@code TRACE_START} (the controller's thread, in order with the operators); nothing once the worker died. */
    void queueTraceStart() {
        if (deadCause == null && !exited) {
            channel.queue(ControlChannel.TRACE_START, new byte[0]);
        }
    }

    /**
     * Queues {@code TRACE_STOP} (the controller's thread, in order with the operators), to be answered through the
     * future of {@link #expectTrace}; nothing once the worker died (the future fails at the exit).
     */
    void queueTraceStop() {
        if (deadCause == null && !exited) {
            channel.queue(ControlChannel.TRACE_STOP, new byte[0]);
        }
    }

    /**
     * The trace part the worker will send after the next {@link #queueTraceStop}; it fails, naming the worker, if the
     * worker exits first.
     */
    CompletableFuture<byte[]> expectTrace() {
        CompletableFuture<byte[]> next = new CompletableFuture<>();
        trace = next;
        if (exited) {
            failTrace();
        }
        return next;
    }

    private void failTrace() {
        trace.completeExceptionally(new IllegalStateException(device + "'s worker (pid " + pid() + ") exited with status "
            + exitStatusNow() + (fatal != null ? " (" + fatal + ")" : "") + " before it sent its trace"));
    }

    /**
     * Kills the process (SIGKILL) if it still runs; closes the channel of one on another node. The death is asked for
     * (a close that overtook the controller, a teardown), so the control channel's reset that follows is not the
     * worker's failure: the close fails what the worker had as cancelled.
     */
    void destroy() {
        stopRequested = true;
        process.destroy();
    }

    @Override
    public int liveBlobs() {
        return liveBlobs;
    }

    /** Waits (up to {@code timeout}) until the worker reported every operator sent to it; false if not. */
    boolean awaitReported(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            synchronized (inFlight) {
                if (inFlight.isEmpty()) {
                    return true;
                }
            }
            if (deadCause != null || System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    /** The last lines the worker printed, for error messages. */
    String outputTail() {
        return process.outputTail();
    }

    /** Fails every operator sent and not yet reported, and refuses new ones (they are abandoned at once). */
    void markDead(Throwable cause) {
        deadCause = cause;
        List<Operator> abandoned;
        synchronized (inFlight) {
            abandoned = new ArrayList<>(inFlight);
            inFlight.clear();
        }
        for (Operator op : abandoned) {
            op.spec().abandon(cause);
            finished(op);
        }
    }

    /** The operator with {@code id} among those sent and not yet reported, or null. */
    private Operator inFlight(long id) {
        synchronized (inFlight) {
            for (Operator op : inFlight) {
                if (op.id() == id) {
                    return op;
                }
            }
        }
        return null;
    }

    private void finished(Operator op) {
        if (op.deviceDone()) {
            graph.completed(op);
            encoder.release(op);
        }
    }

    private void readReports() {
        ControlChannel c = channel;
        try {
            while (true) {
                ControlChannel.Frame frame = c.receive();
                WireReader in = frame.reader();
                switch (frame.type()) {
                    case ControlChannel.DONE -> onDone(in);
                    case ControlChannel.FAILED -> {
                        long opId = in.getLong("failed operator id");
                        FailureKind kind = FailureKind.fromOrdinal(in.getInt("failure kind"));
                        String text = in.getString("failure text");
                        in.expectEnd("FAILED");
                        Operator op = inFlight(opId);
                        if (op != null) {
                            events.operatorFailed(this, op, kind, text);
                        }
                    }
                    case ControlChannel.TRACE_EVENTS -> {
                        boolean last = in.getBoolean("last trace piece");
                        tracePieces.write(frame.bytes(), frame.offset() + 1, frame.length() - 1);
                        if (last) {
                            trace.complete(tracePieces.toByteArray());
                            tracePieces.reset();
                        }
                    }
                    case ControlChannel.FATAL -> {
                        fatal = in.getString("fatal text");
                        LOG.log(System.Logger.Level.ERROR, "the worker of " + device + " failed: " + fatal);
                    }
                    default -> throw new ProtocolException("the worker of " + device + " sent a frame of type " + frame.type()
                        + ", which only the controller sends");
                }
            }
        } catch (EOFException closed) {
            // the worker closed the channel: it is exiting; onExit reports how
        } catch (IOException | RuntimeException e) {
            if (!exited && !stopRequested) {
                fatal = fatal != null ? fatal : "the control channel broke: " + e;
                LOG.log(System.Logger.Level.ERROR, "the control channel of " + device + " broke; stopping its worker", e);
                process.destroy();
            }
        }
    }

    private void onDone(WireReader in) {
        int count = in.getCount("done count", 1 << 20);
        for (int i = 0; i < count; i++) {
            long id = in.getLong("done operator id");
            Operator op;
            synchronized (inFlight) {
                op = inFlight.peekFirst();
                if (op == null || op.id() != id) {
                    throw new ProtocolException("the worker of " + device + " reports operator " + id + " done, but the next one sent is "
                        + (op == null ? "none" : op.label()));
                }
                inFlight.removeFirst();
            }
            finished(op);
        }
        liveBlobs = in.getInt("live blobs");
        in.expectEnd("DONE");
    }

    private void onExit() {
        exited = true;
        int status = process.exitStatusNow();
        try {
            if (reader != null) {
                reader.join(2000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        failTrace(); // after the reader, so that a trace it received whole is not failed
        events.exited(this, status, fatal);
    }
}
