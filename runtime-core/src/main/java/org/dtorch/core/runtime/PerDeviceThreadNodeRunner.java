package org.dtorch.core.runtime;

import java.time.Duration;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;

/**
 * One device's worker thread (the seed's {@code PerDeviceThreadNodeRunner}): runs the device's {@link DeviceLoop}
 * on a thread of this JVM and tells the {@link LogicalGraph} when every device ran an operator.
 *
 * <p>Thread-safe: the controller submits from its thread; the worker thread does the rest.
 */
final class PerDeviceThreadNodeRunner implements DeviceNode {
    private final DeviceLoop loop;
    private final Thread thread;

    PerDeviceThreadNodeRunner(Device device, Device physical, LogicalGraph graph, FailureRegistry failures, ThreadGroupManager groups,
                              Duration timeout) {
        this.loop = new DeviceLoop(device, physical, failures, groups, timeout);
        DeviceLoop.Listener completion = op -> {
            if (op.deviceDone()) {
                graph.completed(op);
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
        loop.submitRelease(operand.id());
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
