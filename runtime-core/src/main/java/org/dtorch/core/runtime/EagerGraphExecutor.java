package org.dtorch.core.runtime;

import java.util.Map;
import org.dtorch.core.graph.GraphMessage;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.PipelineStages;

/**
 * The controller (the seed's {@code EagerGraphExecutor}): on its own thread it takes the client's messages
 * in order, adds each operator to the {@link LogicalGraph} and dispatches it, in topological order, to the
 * worker of every device it runs on; releases go to the devices that hold the operand, after the operators
 * that use it. Workers drop each operator from the graph once they have all run it.
 *
 * <p>Thread-safe: {@link #accept} from any thread; one controller thread does the rest.
 */
final class EagerGraphExecutor {
    private static final Object SHUTDOWN = new Object();
    private static final System.Logger LOG = System.getLogger(EagerGraphExecutor.class.getName());

    private final WorkQueue<Object> inbox = new WorkQueue<>();
    private final LogicalGraph graph;
    private final Map<Long, ? extends DeviceNode> runners;
    private final DeviceFleet fleet;
    private final Thread thread;

    EagerGraphExecutor(LogicalGraph graph, Map<Long, ? extends DeviceNode> runners, DeviceFleet fleet) {
        this.graph = graph;
        this.runners = runners;
        this.fleet = fleet;
        this.thread = Thread.ofPlatform().name("dtorch-controller").daemon().unstarted(this::loop);
    }

    void start() {
        thread.start();
    }

    /** Queues a message from the client. */
    void accept(GraphMessage message) {
        inbox.offer(message);
    }

    /** Processes everything queued so far, then stops; true once the thread has ended, false at the timeout. */
    boolean shutdown(java.time.Duration timeout) throws InterruptedException {
        inbox.offer(SHUTDOWN);
        thread.join(timeout);
        return !thread.isAlive();
    }

    private void loop() {
        while (true) {
            Object message = inbox.poll();
            if (message == null) {
                // Caught up: hand the batch to the devices, then wait for the client.
                runners.values().forEach(DeviceNode::flush);
                message = inbox.take();
            }
            if (message == SHUTDOWN) {
                runners.values().forEach(DeviceNode::flush);
                return;
            }
            try {
                switch (message) {
                    case GraphMessage.AddOperator add -> dispatch(add.operator());
                    case GraphMessage.ReleaseOperand release -> release(release.operand());
                    case null, default -> {
                    }
                }
            } catch (Throwable e) {
                LOG.log(System.Logger.Level.ERROR, "controller failed on " + message, e);
            }
        }
    }

    private void dispatch(Operator op) {
        long started = PipelineStages.start();
        graph.add(op);
        for (long device : op.devices()) {
            runners.get(device).submit(op);
        }
        fleet.dispatched(op);
        PipelineStages.end(PipelineStages.Stage.CONTROLLER_DISPATCH, started);
    }

    private void release(Operand operand) {
        for (long device : operand.meta().sharding().mesh().deviceIds()) {
            runners.get(device).submitRelease(operand);
        }
        graph.clientReleased(operand);
    }
}
