package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.dtorch.core.graph.GraphMessage;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.PipelineStages;
import org.dtorch.core.trace.Tracer;

/**
 * The controller (DTorch's {@code EagerGraphExecutor}): it takes the client's messages in order, adds each
 * operator to the {@link LogicalGraph} and dispatches it, in topological order, to the node of every device it runs
 * on; releases go to the devices that hold the operand, after the operators that use it. Nodes drop each operator
 * from the graph once they have all run it.
 *
 * <p>Where it runs is the fleet's call ({@link DeviceFleet#submitMayBlock()}). When submitting to a
 * node may block (a write to a worker process's socket), the controller is a thread of its own with a queue, so a
 * node that stopped reading never stalls the client. When it never blocks (the queues of worker threads), the
 * thread that sends a message dispatches it at once, under a lock: the client's program order is the order of its
 * calls, a {@link java.lang.ref.Cleaner}'s release is ordered by the lock, and the pipeline has one hand-off (client
 * to device) instead of two. Either way the nodes see the same messages in the same order.
 *
 * <p>Thread-safe: {@link #accept} from any thread; with a controller thread, that thread does the rest.
 */
final class EagerGraphExecutor {
    private static final Object SHUTDOWN = new Object();
    private static final System.Logger LOG = System.getLogger(EagerGraphExecutor.class.getName());

    private final LogicalGraph graph;
    /** The nodes by device id (ids are 0 to n-1): no boxed key per operator. */
    private final DeviceNode[] nodes;
    private final DeviceFleet fleet;
    /** The controller thread and its queue, or null when callers dispatch themselves. */
    private final Thread thread;
    private final WorkQueue<Object> inbox;
    /**
     * Orders the callers that dispatch themselves, and {@link #shutdown} after them; with a controller thread, orders
     * the callers' queueing before the shutdown's.
     */
    private final ReentrantLock dispatching = new ReentrantLock();
    /** Set by {@link #shutdown}; guarded by {@link #dispatching}. */
    private boolean stopped;
    /** Orders an operator's entry into the graph against {@link #cancelUndispatched}. */
    private final Object graphEntry = new Object();
    /** Set by {@link #cancelUndispatched}; guarded by {@link #graphEntry}. */
    private Throwable cancelledBy;

    EagerGraphExecutor(LogicalGraph graph, Map<Long, ? extends DeviceNode> runners, DeviceFleet fleet) {
        this.graph = graph;
        this.nodes = new DeviceNode[runners.size()];
        runners.forEach((device, node) -> nodes[Math.toIntExact(device)] = node);
        this.fleet = fleet;
        if (fleet.submitMayBlock()) {
            this.inbox = new WorkQueue<>();
            this.thread = Thread.ofPlatform().name("dtorch-controller").daemon().unstarted(this::loop);
        } else {
            this.inbox = null;
            this.thread = null;
        }
    }

    void start() {
        if (thread != null) {
            thread.start();
        }
    }

    /** Queues a message from the client, or dispatches it now when callers dispatch themselves. */
    void accept(GraphMessage message) {
        take(message);
    }

    /**
     * Runs {@code action} on the controller after the messages accepted before it and before those after it (now,
     * under the dispatch lock, when callers dispatch themselves); dropped after {@link #shutdown}.
     */
    void runInOrder(Runnable action) {
        take(action);
    }

    /**
     * Queues a {@link GraphMessage} or a {@link Runnable}, or handles it now when callers dispatch themselves. After
     * {@link #shutdown} an operator is refused: the client passed the runtime's open check before a close on another
     * thread, and an operator dropped here would leave its outputs unwritten and its promise, if any, unanswered until
     * the deadline. Releases and actions are dropped: the close frees what they would.
     *
     * @throws IllegalStateException for an operator after {@link #shutdown}
     */
    private void take(Object message) {
        dispatching.lock();
        try {
            if (stopped) {
                if (message instanceof GraphMessage.AddOperator add) {
                    throw new IllegalStateException(add.operator().spec().name() + ": the runtime is closed");
                }
                return;
            }
            if (thread != null) {
                inbox.offer(message);
                return;
            }
            handle(message);
            if (message instanceof GraphMessage m) {
                flush(m);
            }
        } finally {
            dispatching.unlock();
        }
    }

    /**
     * Processes everything queued so far, then stops; true once done, false at the timeout. Operators that come
     * after it are refused, other messages dropped.
     */
    boolean shutdown(Duration timeout) throws InterruptedException {
        if (thread == null) {
            // A caller inside a dispatch only queues to nodes, which never blocks: the wait is short.
            if (!dispatching.tryLock(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
                return false;
            }
            try {
                stopped = true;
            } finally {
                dispatching.unlock();
            }
            return true;
        }
        dispatching.lock(); // held only to queue, never while a node is written to
        try {
            stopped = true;
            inbox.offer(SHUTDOWN);
        } finally {
            dispatching.unlock();
        }
        thread.join(timeout);
        return !thread.isAlive();
    }

    /**
     * From now on an operator that this controller would still dispatch fails with {@code cause} instead ({@link
     * org.dtorch.core.graph.OpSpec#abandon}): the close gave up waiting for the controller, whose queue may still hold
     * operators the client has futures of, or a client's dispatch raced with it. An operator already in the graph is
     * the close's to cancel; each operator is in one of the two, never in neither.
     */
    void cancelUndispatched(Throwable cause) {
        synchronized (graphEntry) {
            if (cancelledBy == null) {
                cancelledBy = cause;
            }
        }
    }

    private void loop() {
        while (true) {
            List<Object> messages = inbox.poll();
            if (messages.isEmpty()) {
                // Caught up: hand the batch to the devices, then wait for the client.
                flushAll();
                messages = inbox.take();
            }
            for (int i = 0, n = messages.size(); i < n; i++) {
                Object message = messages.get(i);
                if (message == SHUTDOWN) {
                    flushAll();
                    return;
                }
                handle(message);
            }
        }
    }

    private void handle(Object message) {
        try {
            switch (message) {
                case GraphMessage.AddOperator add -> dispatch(add.operator());
                case GraphMessage.ReleaseOperand release -> release(release.operand());
                case Runnable action -> action.run();
                case null, default -> {
                }
            }
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.ERROR, "controller failed on " + message, e);
        }
    }

    private void dispatch(Operator op) {
        long started = PipelineStages.start();
        long traced = Tracer.now();
        synchronized (graphEntry) {
            if (cancelledBy != null) {
                op.spec().abandon(cancelledBy);
                return;
            }
            graph.add(op);
        }
        Throwable broken = fleet.brokenBy();
        if (broken != null) {
            // A node died while this operator was on its way here: the fleet's sweep of the pending operators may have
            // run before the operator joined the graph, so it fails now, and no node is given it.
            op.spec().abandon(broken);
            return;
        }
        List<Long> devices = op.devices();
        for (int i = 0, n = devices.size(); i < n; i++) {
            nodes[devices.get(i).intValue()].submit(op);
        }
        fleet.dispatched(op);
        PipelineStages.end(PipelineStages.Stage.CONTROLLER_DISPATCH, started);
        Tracer.dispatch(op.id(), op.spec().name(), traced);
    }

    private void release(Operand operand) {
        List<Long> devices = operand.meta().sharding().mesh().deviceIds();
        for (int i = 0, n = devices.size(); i < n; i++) {
            nodes[devices.get(i).intValue()].submitRelease(operand);
        }
        graph.clientReleased(operand);
    }

    /** Makes what {@code message} queued visible to its nodes (a no-op for threads). */
    private void flush(GraphMessage message) {
        List<Long> devices = switch (message) {
            case GraphMessage.AddOperator add -> add.operator().devices();
            case GraphMessage.ReleaseOperand release -> release.operand().meta().sharding().mesh().deviceIds();
        };
        for (int i = 0, n = devices.size(); i < n; i++) {
            nodes[devices.get(i).intValue()].flush();
        }
    }

    private void flushAll() {
        for (DeviceNode node : nodes) {
            node.flush();
        }
    }
}
