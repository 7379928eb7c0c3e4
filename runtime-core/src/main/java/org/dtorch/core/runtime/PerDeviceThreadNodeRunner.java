package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;

/**
 * One device's worker thread (DTorch's {@code PerDeviceThreadNodeRunner}): runs the device's {@link DeviceLoop}
 * on a thread of this JVM and hands the {@link LogicalGraph} the operators every device ran, once per batch of work.
 *
 * <p>Thread-safe: the controller submits (the client's thread, one at a time); the worker thread does the rest.
 */
final class PerDeviceThreadNodeRunner implements DeviceNode {
    private final DeviceLoop loop;
    private final Thread thread;

    PerDeviceThreadNodeRunner(Device device, Device physical, LogicalGraph graph, FailureRegistry failures, ThreadGroupManager groups,
                              Duration timeout, MemoryWatch watch) {
        this.loop = new DeviceLoop(device, physical, failures, groups, timeout, watch);
        DeviceLoop.Listener completion = new DeviceLoop.Listener() {
            private final List<Operator> done = new ArrayList<>();

            @Override
            public void ran(Operator op) {
                if (op.deviceDone()) {
                    done.add(op);
                }
            }

            /**
             * One hand-over per batch; the dispatching thread does the graph's bookkeeping, so that two threads do not
             * write the same counters for every operator.
             */
            @Override
            public void batchDone() {
                if (!done.isEmpty()) {
                    graph.completedLater(done);
                    done.clear();
                }
            }
        };
        this.thread = Thread.ofPlatform().name("dtorch-worker-" + device).daemon().unstarted(() -> loop.run(completion));
    }

    @Override
    public void start() {
        thread.start();
    }

    @Override
    public void submit(Operator op) {
        loop.submit(op);
    }

    @Override
    public void submitRelease(Operand operand) {
        loop.submitRelease(operand);
    }

    @Override
    public void cancel(Throwable cause) {
        loop.cancel(cause);
    }

    @Override
    public void stop() {
        loop.stop();
    }

    @Override
    public boolean join(Duration timeout) throws InterruptedException {
        thread.join(timeout);
        return !thread.isAlive();
    }

    @Override
    public int liveBlobs() {
        return loop.liveBlobs();
    }
}
