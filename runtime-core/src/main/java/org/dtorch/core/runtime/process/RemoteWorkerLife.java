package org.dtorch.core.runtime.process;

import java.util.concurrent.CompletableFuture;
import org.dtorch.core.device.Device;

/**
 * A worker process on another node, as its node agent reports it ({@link NodeLink}): its pid once started, its exit
 * status and last output once it exited, or the loss of its whole node. Killing it asks the node agent and closes its
 * control channel, so that it stops even if its node agent cannot be reached.
 *
 * <p>Thread-safe: its state changes on the node link's reader thread; the rest reads volatile fields.
 */
final class RemoteWorkerLife implements WorkerLife {
    private final Device device;
    private final NodeLink node;
    private final CompletableFuture<Integer> exit = new CompletableFuture<>();
    private volatile long pid = -1;
    private volatile String outputTail = "";
    private volatile WorkerDiedException lost;
    private volatile ControlChannel channel;

    RemoteWorkerLife(Device device, NodeLink node) {
        this.device = device;
        this.node = node;
    }

    /** The node agent started it. */
    void started(long processId) {
        this.pid = processId;
    }

    /** Its control channel, once it connected (closed when it is killed). */
    void connected(ControlChannel control) {
        this.channel = control;
    }

    /** The node agent saw it exit. */
    void exited(int status, String output) {
        this.outputTail = output;
        exit.complete(status);
    }

    /**
     * Its node was lost with it: {@link #lost()} says so from now on, and its control channel is closed (a host that
     * fell off the network would otherwise keep the connection, and its reader, open); then it counts as exited.
     */
    void nodeLost(String why) {
        if (exit.isDone()) {
            return;
        }
        lost = new WorkerDiedException(device, node.spec().describeNode(node.rank()) + " at " + node.peer() + " was lost: " + why
            + "; the worker process of " + device + " (pid " + pid + ") is lost with it");
        ControlChannel c = channel;
        if (c != null) {
            c.close(); // first: the exit's handling waits for the channel's reader to end
        }
        exit.complete(-1);
    }

    /** Why it is gone when its node was lost (not a report of its exit), or null. */
    @Override
    public WorkerDiedException lost() {
        return lost;
    }

    @Override
    public long pid() {
        return pid;
    }

    @Override
    public boolean isAlive() {
        return !exit.isDone();
    }

    @Override
    public int exitStatusNow() {
        return exit.isDone() ? exit.join() : -1;
    }

    @Override
    public CompletableFuture<Integer> onExit() {
        return exit;
    }

    @Override
    public void destroy() {
        if (exit.isDone()) {
            return;
        }
        node.killWorkers();
        ControlChannel c = channel;
        if (c != null) {
            c.close();
        }
    }

    @Override
    public String outputTail() {
        return outputTail;
    }
}
