package org.dtorch.core.runtime;

import java.time.Duration;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.PipelineStages;

/**
 * One device's worker thread (the seed's {@code PerDeviceThreadNodeRunner}): runs the operators the
 * controller dispatches to it, in order, through its {@link NaiveRunner}, and releases operands when told.
 * Devices receive operators in the same global order, so collectives meet.
 *
 * <p>Thread-safe: the controller submits from its thread; the worker thread does the rest.
 */
final class PerDeviceThreadNodeRunner implements DeviceNode {
    private static final Object STOP = new Object();
    private static final System.Logger LOG = System.getLogger(PerDeviceThreadNodeRunner.class.getName());

    private record Release(Operand operand) {
    }

    private final Device device;
    private final WorkQueue<Object> inbox = new WorkQueue<>();
    private final NaiveRunner runner;
    private final LogicalGraph graph;
    private final Thread thread;
    private volatile Throwable cancelledBy;

    PerDeviceThreadNodeRunner(Device device, Device physical, LogicalGraph graph, FailureRegistry failures, ThreadGroupManager groups,
                              Duration timeout) {
        this.device = device;
        this.graph = graph;
        this.runner = new NaiveRunner(device, physical, failures, groups, timeout);
        this.thread = Thread.ofPlatform().name("dtorch-worker-" + device).daemon().unstarted(this::loop);
    }

    @Override
    public void start() {
        thread.start();
    }

    @Override
    public void submit(Operator op) {
        inbox.offer(op);
    }

    @Override
    public void submitRelease(Operand operand) {
        inbox.offer(new Release(operand));
    }

    /** Fails every operator not yet run instead of running it, and interrupts a wait in progress. */
    @Override
    public void cancel(Throwable cause) {
        cancelledBy = cause;
        thread.interrupt();
    }

    @Override
    public void stop() {
        inbox.offer(STOP);
    }

    @Override
    public boolean join(Duration timeout) throws InterruptedException {
        thread.join(timeout);
        return !thread.isAlive();
    }

    @Override
    public int liveBlobs() {
        return runner.liveBlobs();
    }

    private void loop() {
        try {
            runner.bindToThisThread();
            while (true) {
                Object task = inbox.take();
                if (task == null) {
                    if (cancelledBy == null) {
                        continue;
                    }
                    Thread.interrupted();
                    continue;
                }
                if (task == STOP) {
                    return;
                }
                try {
                    if (task instanceof Operator op) {
                        long started = PipelineStages.start();
                        runner.execute(op, cancelledBy);
                        PipelineStages.end(PipelineStages.Stage.WORKER_EXECUTE, started);
                        if (op.deviceDone()) {
                            graph.completed(op);
                        }
                    } else if (task instanceof Release r) {
                        runner.release(r.operand());
                    }
                } catch (Throwable e) {
                    LOG.log(System.Logger.Level.ERROR, "worker " + device + " failed on " + task, e);
                }
            }
        } finally {
            runner.clear();
        }
    }
}
