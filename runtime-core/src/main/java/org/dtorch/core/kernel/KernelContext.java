package org.dtorch.core.kernel;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * What a kernel needs to run on one device: the device and its stream, the runtime's
 * {@link ThreadGroupManager}, and a namespace for store keys that is unique to one operation and shared by
 * every device that runs it (DTorch's {@code mTensorStoreCreateInfo}: graph id and operator).
 *
 * <p>Thread-safe: immutable; each device thread uses its own context.
 *
 * @param device         the device this call runs for
 * @param stream         its stream
 * @param groups         the runtime's group manager
 * @param storeNamespace the operation's store-key prefix, such as {@code g3/op17}
 * @param timeout        the deadline of every blocking call
 */
public record KernelContext(Device device, DeviceStream stream, ThreadGroupManager groups, String storeNamespace, Duration timeout) {

    /** Validates the components. */
    public KernelContext {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(stream, "stream");
        Objects.requireNonNull(groups, "groups");
        if (storeNamespace == null || storeNamespace.isBlank()) {
            throw new IllegalArgumentException("storeNamespace must be non-blank");
        }
        CommOptions.validateTimeout(timeout);
    }

    /** A context on the device's default stream with the global timeout. */
    public static KernelContext of(Device device, ThreadGroupManager groups, String storeNamespace) {
        return new KernelContext(device, DeviceStream.of(device), groups, storeNamespace, CommOptions.global().timeout());
    }

    /** The global id of the device. */
    public long deviceId() {
        return device.index();
    }

    /** This device's group along mesh dimension {@code meshDim}, bound to this context's stream. */
    ThreadGroup groupAlong(DeviceMesh mesh, int meshDim) {
        return bound(mesh, mesh.groupAlong(meshDim, deviceId()));
    }

    /**
     * This device's group over mesh dimensions {@code meshDims} together (ranks row-major in the given order, as
     * {@link DeviceMesh#subMesh(long, int[])}), bound to this context's stream: the group of a step that spans several
     * mesh dimensions, such as a ring over a sequence sharded on two of them.
     */
    public ThreadGroup groupOver(DeviceMesh mesh, int[] meshDims) {
        return bound(mesh, mesh.subMesh(deviceId(), meshDims).deviceIds());
    }

    private ThreadGroup bound(DeviceMesh mesh, List<Long> ranks) {
        ThreadGroup group = groups.getThreadGroup(mesh.kind(), ranks, deviceId());
        group.setStream(stream);
        return group;
    }

    /**
     * Creates (a barrier with the other participants) this device's instance of the operation's store
     * {@code name}, keyed by the runtime instance too, so that two runtimes of one JVM never meet; a File
     * store when the devices are processes. When the groups have a rendezvous (devices on several hosts), the
     * backend follows where the participants are: Memory in one process, File on one host, Network across hosts.
     */
    TensorStore store(String name, List<Long> participants) {
        int rank = participants.indexOf(deviceId());
        if (rank < 0) {
            throw new IllegalArgumentException("device " + device + " is not among the participants " + participants + " of store '"
                + storeNamespace + "/" + name + "'");
        }
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(groups.storeType()).instanceId(groups.instanceId())
            .storeKey(groups.instanceId() + "/" + storeNamespace + "/" + name).worldSize(participants.size()).rank(rank).timeout(timeout)
            .rendezvous(groups.rendezvous()).build();
        return info.rendezvous() == null ? TensorStore.create(info) : TensorStore.createForParticipants(info);
    }
}
