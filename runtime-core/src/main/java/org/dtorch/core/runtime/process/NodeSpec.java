package org.dtorch.core.runtime.process;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.communication.store.RendezvousAddress;

/**
 * Where this process stands in a run of several nodes (hosts), torchrun's {@code NNODES}, {@code NODE_RANK} and
 * {@code MASTER_ADDR:MASTER_PORT}: node 0 runs the script and the controller, and serves the run's rendezvous (a c10d
 * {@code TCPStore}) at the master address; every node runs {@link #devicesPerNode} worker processes. Devices are
 * numbered node-major: node {@code r} has devices {@code r * devicesPerNode} to {@code (r + 1) * devicesPerNode - 1}.
 *
 * <p>Thread-safe: immutable.
 *
 * @param nodes          how many nodes the run has, at least 2
 * @param nodeRank       this node's rank, 0 to nodes - 1
 * @param master         node 0's rendezvous address, as every node reaches it
 * @param token          the run's shared token, which every control connection proves ({@link ControlHandshake})
 * @param devicesPerNode devices (worker processes) on every node, at least 1
 */
public record NodeSpec(int nodes, int nodeRank, RendezvousAddress master, ClusterToken token, int devicesPerNode) {

    /** Validates the components. */
    public NodeSpec {
        if (nodes < 2) {
            throw new IllegalArgumentException("a run across nodes has at least 2 nodes, got " + nodes);
        }
        if (nodeRank < 0 || nodeRank >= nodes) {
            throw new IllegalArgumentException("node rank must be in [0, " + nodes + "), got " + nodeRank);
        }
        Objects.requireNonNull(master, "master");
        Objects.requireNonNull(token, "token: a run of " + nodes + " nodes needs a shared token");
        if (devicesPerNode < 1) {
            throw new IllegalArgumentException("devices per node must be >= 1, got " + devicesPerNode);
        }
    }

    /** Every device of the run. */
    public int deviceCount() {
        return Math.multiplyExact(nodes, devicesPerNode);
    }

    /** The node {@code device} is on. */
    public int nodeOf(long device) {
        return Math.toIntExact(device / devicesPerNode);
    }

    /** The devices of {@code node}, in order. */
    public List<Long> devicesOf(int node) {
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < devicesPerNode; i++) {
            ids.add((long) node * devicesPerNode + i);
        }
        return ids;
    }

    /** {@code device}'s index among its node's devices: the GPU it runs on there. */
    public int localIndex(long device) {
        return Math.toIntExact(device % devicesPerNode);
    }

    /** "node R (devices a, b)", for messages. */
    public String describeNode(int node) {
        List<Long> ids = devicesOf(node);
        return "node " + node + " (device" + (ids.size() == 1 ? " " : "s ") + String.join(", ", ids.stream().map(String::valueOf).toList())
            + ")";
    }
}
