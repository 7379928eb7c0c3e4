package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.device.DeviceKind;

/**
 * The collectives part of a multi-node test, run by every device thread of every "node" JVM: every collective of
 * {@link ThreadGroup} on the group of all {@code nodes x devicesPerNode} devices (node-major ids), then on the sub-group
 * of one device per node that holds this device (the same local index on each node).
 */
public final class NodeGroupsScenario {

    private NodeGroupsScenario() {
    }

    /**
     * Runs the scenario for {@code deviceId} with the groups of {@code manager}; the mismatches, each prefixed by the group,
     * and a line per group saying its backend and how long joining it took ({@code JOINED ...}).
     */
    public static List<String> run(ThreadGroupManager manager, long deviceId, int nodes, int devicesPerNode, List<String> joined) {
        List<String> failures = new ArrayList<>();
        List<Long> everyDevice = GroupFixtures.ids(nodes * devicesPerNode);
        List<Long> onePerNode = new ArrayList<>();
        for (int node = 0; node < nodes; node++) {
            onePerNode.add(node * (long) devicesPerNode + deviceId % devicesPerNode);
        }
        for (List<Long> ids : List.of(everyDevice, onePerNode)) {
            long start = System.nanoTime();
            ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, ids, deviceId);
            joined.add("JOINED " + group.key() + " rank " + group.getRank() + " " + group.backendName() + " in "
                + (System.nanoTime() - start) / 1_000_000 + " ms");
            if (!group.backendName().equals("gloo")) {
                failures.add(group.key() + ": backend " + group.backendName() + ", expected gloo");
            }
            ThreadGroupProcessTest.runAll(group).forEach(f -> failures.add(group.key() + " " + f));
        }
        return failures;
    }
}
