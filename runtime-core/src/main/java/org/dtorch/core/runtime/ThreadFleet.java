package org.dtorch.core.runtime;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;

/**
 * Thread mode's fleet: every device is a worker thread of this JVM ({@link PerDeviceThreadNodeRunner}), failures
 * are recorded in a map of this process, promises are MEMORY ones (FILE-free), and the groups are in-process.
 * A thread does not die, so the fleet never breaks; a device blocked in a collective at shutdown is freed by
 * aborting the groups, and a thread still in a kernel after the grace is left behind with a warning.
 *
 * <p>Thread-safe: {@link #createNodes} once; the rest from any thread.
 */
final class ThreadFleet implements DeviceFleet {
    private static final System.Logger LOG = System.getLogger(ThreadFleet.class.getName());

    private final RuntimeOptions options;
    private final List<Device> devices;
    private final ThreadGroupManager groups;
    private final FailureRegistry failures = FailureRegistry.inMemory();
    private final Map<Long, DeviceNode> nodes = new LinkedHashMap<>();

    ThreadFleet(RuntimeOptions options, List<Device> devices, String instanceId) {
        this.options = options;
        this.devices = devices;
        this.groups = new ThreadGroupManager(options.sameDevice(), instanceId, options.timeout(), ThreadGroupManager.Role.ONE_PROCESS);
    }

    @Override
    public Map<Long, DeviceNode> createNodes(LogicalGraph graph, Owner owner) {
        for (Device device : devices) {
            nodes.put((long) device.index(), new PerDeviceThreadNodeRunner(device, options.physicalDevice(device), graph, failures, groups,
                options.timeout(), options.memoryWatch()));
        }
        return nodes;
    }

    @Override
    public ThreadGroupManager groups() {
        return groups;
    }

    @Override
    public FailureRegistry failures() {
        return failures;
    }

    /** MEMORY: every device is a thread of the client's process. */
    @Override
    public TensorPromiseType promiseType() {
        return TensorPromiseType.MEMORY;
    }

    /**
     * Submitting only queues to a worker thread of this JVM, so it never blocks: the client's thread dispatches, one
     * hand-off fewer.
     */
    @Override
    public boolean submitMayBlock() {
        return false;
    }

    @Override
    public Throwable brokenBy() {
        return null;
    }

    @Override
    public void closing() {
    }

    /** A thread cannot be killed; the groups are aborted by {@link #cancel} and {@link #unblockDevices}. */
    @Override
    public void forceStop() {
    }

    @Override
    public void cancel(CommException cause, LogicalGraph graph) {
        nodes.values().forEach(n -> n.cancel(cause));
        groups.abort(cause.getMessage());
    }

    /** Aborts the groups idle peers hold, again on every pass, as each freed rank frees others. */
    @Override
    public void unblockDevices() {
        groups.abort("the runtime is closing");
    }

    @Override
    public void leftBehind(Map<Long, DeviceNode> running) {
        running.keySet().forEach(device -> LOG.log(System.Logger.Level.WARNING, "device " + device + " did not stop within "
            + Deadline.format(EagerRuntime.TEARDOWN_GRACE) + "; its thread is left to finish the kernel it is in"));
    }

    @Override
    public void release() {
        groups.close();
    }
}
