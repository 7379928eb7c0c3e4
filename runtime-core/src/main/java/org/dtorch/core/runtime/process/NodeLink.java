package org.dtorch.core.runtime.process;

import java.io.EOFException;
import java.io.IOException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;

/**
 * The controller's connection to the node agent of one other node ({@link NodeAgent}): it hears which worker each
 * device got ({@code NODE_WORKERS}) and when one exits ({@code WORKER_EXIT}), and exchanges a {@code HEARTBEAT} every
 * second. A connection that closes, breaks, or stays silent past the heartbeat timeout loses the node: every worker of
 * it is gone at once ({@link RemoteWorkerLife#nodeLost}), unless the controller was stopping the node itself.
 *
 * <p>Thread-safe: one reader thread; sends are the channel's (synchronized).
 */
final class NodeLink {
    private static final System.Logger LOG = System.getLogger(NodeLink.class.getName());

    private final NodeSpec spec;
    private final int rank;
    private final String peer;
    private final ControlChannel channel;
    private final Map<Long, RemoteWorkerLife> workers = new LinkedHashMap<>();
    private final AtomicBoolean killSent = new AtomicBoolean();
    private volatile long lastHeardNanos = System.nanoTime();
    private volatile boolean reading;
    private volatile Thread reader;
    private volatile boolean stopping;
    private volatile boolean lost;

    /** A link over {@code channel}, on which node {@code rank}'s agent introduced itself from {@code peer}. */
    NodeLink(NodeSpec spec, int rank, String peer, ControlChannel channel, DeviceKind kind) {
        this.spec = spec;
        this.rank = rank;
        this.peer = peer;
        this.channel = channel;
        for (long id : spec.devicesOf(rank)) {
            workers.put(id, new RemoteWorkerLife(new Device(kind, Math.toIntExact(id)), this));
        }
        channel.setPeer(spec.describeNode(rank) + " at " + peer);
    }

    NodeSpec spec() {
        return spec;
    }

    int rank() {
        return rank;
    }

    /** The agent's address. */
    String peer() {
        return peer;
    }

    /** The lives of this node's workers, by device. */
    Map<Long, RemoteWorkerLife> workers() {
        return workers;
    }

    /** Whether the node was lost (its connection closed, broke or went silent). */
    boolean isLost() {
        return lost;
    }

    /** Sends {@code type} now; false if the connection is gone. */
    boolean send(byte type, byte[] payload) {
        try {
            channel.send(type, payload);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** Starts the reader thread; heartbeats go out from now on (none may precede {@code NODE_START}). */
    void start() {
        lastHeardNanos = System.nanoTime();
        reading = true;
        reader = Thread.ofPlatform().daemon().name("dtorch-node-link-" + rank).start(this::read);
    }

    /** A second passed: sends a heartbeat, and loses the node if nothing came from it for {@code timeout}. */
    void heartbeat(Duration timeout) {
        if (!reading || stopping || lost) {
            return;
        }
        long silentNanos = System.nanoTime() - lastHeardNanos;
        if (silentNanos > timeout.toNanos()) {
            lose("no heartbeat for " + silentNanos / 1_000_000 + " ms (timeout " + timeout.toMillis() + " ms)");
            return;
        }
        send(ControlChannel.HEARTBEAT, new byte[0]);
    }

    /** Asks the agent to kill its workers (once). */
    void killWorkers() {
        if (killSent.compareAndSet(false, true)) {
            send(ControlChannel.NODE_KILL, new byte[0]);
        }
    }

    /** The run ends: the agent stops its workers and exits; its connection closing is no loss from now on. Idempotent. */
    void shutdown() {
        if (stopping) {
            return;
        }
        stopping = true;
        send(ControlChannel.SHUTDOWN, new byte[0]);
        channel.shutdownOutput();
    }

    /**
     * Closes the connection, after the agent closed its side when the run was ended with {@link #shutdown} (waiting at
     * most until {@code deadlineNanos}, a {@link System#nanoTime()} value): closing with its heartbeats unread would reset
     * the connection, and the agent could take the reset for a broken controller.
     */
    void close(long deadlineNanos) {
        stopping = true;
        Thread r = reader;
        if (r != null) {
            try {
                r.join(Math.max(1, (deadlineNanos - System.nanoTime()) / 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        channel.close();
    }

    private void read() {
        try {
            while (true) {
                ControlChannel.Frame frame = channel.receive();
                lastHeardNanos = System.nanoTime();
                WireReader in = frame.reader();
                switch (frame.type()) {
                    case ControlChannel.HEARTBEAT -> in.expectEnd("HEARTBEAT");
                    case ControlChannel.NODE_WORKERS -> {
                        int count = in.getCount("worker count", workers.size());
                        for (int i = 0; i < count; i++) {
                            worker(in.getLong("device")).started(in.getLong("pid"));
                        }
                        in.expectEnd("NODE_WORKERS");
                    }
                    case ControlChannel.WORKER_EXIT -> {
                        RemoteWorkerLife worker = worker(in.getLong("device"));
                        int status = in.getInt("exit status");
                        String output = in.getString("output tail");
                        in.expectEnd("WORKER_EXIT");
                        worker.exited(status, output);
                    }
                    default -> throw new ProtocolException(spec.describeNode(rank) + " sent a frame of type " + frame.type()
                        + ", which a node agent does not send");
                }
            }
        } catch (EOFException e) {
            lose("its control connection closed (its agent exited or was killed)");
        } catch (IOException | RuntimeException e) {
            lose("its control connection broke: " + e.getMessage());
        }
    }

    private RemoteWorkerLife worker(long device) {
        RemoteWorkerLife worker = workers.get(device);
        if (worker == null) {
            throw new ProtocolException(spec.describeNode(rank) + " reported device " + device + ", which is not one of its devices");
        }
        return worker;
    }

    private void lose(String why) {
        if (stopping) {
            return;
        }
        synchronized (this) {
            if (lost) {
                return;
            }
            lost = true;
        }
        LOG.log(System.Logger.Level.ERROR, spec.describeNode(rank) + " at " + peer + " was lost: " + why);
        channel.close();
        workers.values().forEach(w -> w.nodeLost(why));
    }
}
