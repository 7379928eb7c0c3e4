package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.Objects;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.process.NodeSpec;

/**
 * How a runtime is set up. Defaults: 4 CPU devices, thread mode (every device a worker thread of this
 * JVM), distinct devices (collectives over Gloo), the global communication timeout, {@link #DEFAULT_SHUTDOWN_TIMEOUT}
 * to drain at close.
 *
 * <p>Thread-safe: immutable.
 *
 * @param deviceKind          the kind of every device
 * @param deviceCount         how many devices (ids 0 to deviceCount - 1)
 * @param sameDevice          simulate every device on one physical device (same-device collectives)
 * @param perDevicePerProcess one worker process (JVM) per device instead of threads, for CPU and CUDA devices
 * @param timeout             deadline of every blocking call of the runtime's kernels
 * @param shutdownTimeout     how long {@code close()} waits for queued work before cancelling it; the teardown
 *                            after that is bounded too, so {@code close()} returns within this plus 2 s
 * @param memoryWatch         when a device warns that its tensors grow at every sync ({@link MemoryWatch#DEFAULTS})
 * @param nodes               the run's nodes when it spans several hosts (then {@code deviceCount} counts every node's
 *                            devices, and each device is a worker process), or null for one host
 */
public record RuntimeOptions(DeviceKind deviceKind, int deviceCount, boolean sameDevice, boolean perDevicePerProcess,
                             Duration timeout, Duration shutdownTimeout, MemoryWatch memoryWatch, NodeSpec nodes) {

    /**
     * How long {@code close()} lets queued work run by default: enough for what a script queued last, short
     * enough that {@code close()} returns within 5 s whatever the devices are doing. Wait on a future (or
     * {@code sync()}) before closing to keep longer work.
     */
    public static final Duration DEFAULT_SHUTDOWN_TIMEOUT = Duration.ofSeconds(2);

    /** Validates the components. */
    public RuntimeOptions {
        Objects.requireNonNull(deviceKind, "deviceKind");
        if (deviceCount < 1) {
            throw new IllegalArgumentException("deviceCount must be >= 1, got " + deviceCount);
        }
        CommOptions.validateTimeout(timeout);
        CommOptions.validateTimeout(shutdownTimeout);
        Objects.requireNonNull(memoryWatch, "memoryWatch");
        if (nodes != null) {
            if (deviceCount != nodes.deviceCount()) {
                throw new IllegalArgumentException("a run of " + nodes.nodes() + " nodes with " + nodes.devicesPerNode() + " devices each has "
                    + nodes.deviceCount() + " devices, got deviceCount " + deviceCount);
            }
            if (sameDevice) {
                throw new IllegalArgumentException("the same-device simulation runs on one host: it cannot span " + nodes.nodes() + " nodes");
            }
        }
    }

    /** The options with the default {@link MemoryWatch}, on one host. */
    public RuntimeOptions(DeviceKind deviceKind, int deviceCount, boolean sameDevice, boolean perDevicePerProcess, Duration timeout,
                          Duration shutdownTimeout) {
        this(deviceKind, deviceCount, sameDevice, perDevicePerProcess, timeout, shutdownTimeout, MemoryWatch.DEFAULTS, null);
    }

    /** Whether the devices are worker processes: per-device-process mode, or a run across nodes. */
    public boolean workerProcesses() {
        return perDevicePerProcess || nodes != null;
    }

    /**
     * The device whose memory and stream logical device {@code logical} of this runtime uses, in its worker thread
     * or worker process alike: itself on CPU and for distinct GPUs; {@code cuda:0} for every rank when
     * {@link #sameDevice()} on CUDA (DTorch's simulation of N devices on one GPU). GPU indexes are as this process
     * numbers them ({@code CUDA_VISIBLE_DEVICES} applies; worker processes inherit it).
     */
    public Device physicalDevice(Device logical) {
        Objects.requireNonNull(logical, "logical");
        if (logical.kind() == DeviceKind.CUDA && nodes != null) {
            return Device.cuda(nodes.localIndex(logical.index())); // the GPUs of its own node
        }
        return logical.kind() == DeviceKind.CUDA && sameDevice ? Device.cuda(0) : logical;
    }

    /** The defaults: 4 CPU devices in threads. */
    public static RuntimeOptions defaults() {
        return new RuntimeOptions(DeviceKind.CPU, 4, false, false, CommOptions.global().timeout(), DEFAULT_SHUTDOWN_TIMEOUT);
    }

    /** A copy with another device count. */
    public RuntimeOptions withDeviceCount(int count) {
        return new RuntimeOptions(deviceKind, count, sameDevice, perDevicePerProcess, timeout, shutdownTimeout, memoryWatch, nodes);
    }

    /** A copy with the same-device simulation on or off. */
    public RuntimeOptions withSameDevice(boolean value) {
        return new RuntimeOptions(deviceKind, deviceCount, value, perDevicePerProcess, timeout, shutdownTimeout, memoryWatch, nodes);
    }

    /** A copy with per-device-process mode on or off. */
    public RuntimeOptions withPerDevicePerProcess(boolean value) {
        return new RuntimeOptions(deviceKind, deviceCount, sameDevice, value, timeout, shutdownTimeout, memoryWatch, nodes);
    }

    /** A copy with another kernel timeout. */
    public RuntimeOptions withTimeout(Duration value) {
        return new RuntimeOptions(deviceKind, deviceCount, sameDevice, perDevicePerProcess, value, shutdownTimeout, memoryWatch, nodes);
    }

    /** A copy with another shutdown timeout. */
    public RuntimeOptions withShutdownTimeout(Duration value) {
        return new RuntimeOptions(deviceKind, deviceCount, sameDevice, perDevicePerProcess, timeout, value, memoryWatch, nodes);
    }

    /**
     * A copy spanning the nodes of {@code value} (null: one host); the device count becomes the run's.
     */
    public RuntimeOptions withNodes(NodeSpec value) {
        return new RuntimeOptions(deviceKind, value == null ? deviceCount : value.deviceCount(), sameDevice, perDevicePerProcess, timeout,
            shutdownTimeout, memoryWatch, value);
    }

    /** A copy with another memory watch. */
    public RuntimeOptions withMemoryWatch(MemoryWatch value) {
        return new RuntimeOptions(deviceKind, deviceCount, sameDevice, perDevicePerProcess, timeout, shutdownTimeout, value, nodes);
    }
}
