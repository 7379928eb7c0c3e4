package org.dtorch.core.kernel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.group.NodeGroupsScenario;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.CrossMeshTransfer;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Replicate;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.testing.ChildMain;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;

/**
 * A process of one "node" of {@link MultiNodeGroupsTest}: {@code MultiNodeChild <rendezvous> <instance> <node> <devices>}
 * (device ids separated by commas), run in a JVM with the node's host identity. Of the node's {@value #DEVICES_PER_NODE}
 * CPU devices (ids {@code node * 2 + i}) it runs those given, each on a thread, sharing one {@link ThreadGroupManager} of
 * {@link ThreadGroupManager.Role#WORKER} with the run's rendezvous, as a worker process of a multi-node run has. Prints a
 * {@code JOINED} line per group and rank, then {@code OK} or {@code FAILED <mismatches>}.
 */
public final class MultiNodeChild {
    static final int NODES = 2;
    static final int DEVICES_PER_NODE = 2;
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final long[] SHAPE = {6, 4};

    private MultiNodeChild() {
    }

    public static void main(String[] args) {
        List<Long> devices = Arrays.stream(args[3].split(",")).map(Long::valueOf).toList();
        ChildMain.exitWithMismatches(() -> runNode(RendezvousAddress.parse(args[0]), args[1], Integer.parseInt(args[2]), devices));
    }

    /**
     * Runs {@code devices} of {@code node} (all of them, or those this process hosts) on a thread each; the mismatches of
     * all of them.
     */
    static List<String> runNode(RendezvousAddress rendezvous, String instance, int node, List<Long> devices) {
        List<String> joined = Collections.synchronizedList(new ArrayList<>());
        List<List<String>> perDevice;
        try (ThreadGroupManager groups = new ThreadGroupManager(false, instance, TIMEOUT, ThreadGroupManager.Role.WORKER, rendezvous)) {
            perDevice = RankThreads.run(devices.size(), Duration.ofSeconds(120), i -> {
                long device = devices.get(i);
                List<String> failures = new ArrayList<>(NodeGroupsScenario.run(groups, device, NODES, DEVICES_PER_NODE, joined));
                failures.addAll(stores(groups, device, node, devices.size() == DEVICES_PER_NODE));
                failures.addAll(transferAcrossNodes(groups, device));
                failures.addAll(transferWithinNode(groups, device, node));
                return failures;
            });
        }
        joined.forEach(System.out::println);
        return perDevice.stream().flatMap(List::stream).toList();
    }

    /**
     * The operation stores' backends: Network among every device; among the devices of one node, Memory when this
     * process hosts them all ({@code wholeNode}), else File.
     */
    private static List<String> stores(ThreadGroupManager groups, long device, int node, boolean wholeNode) {
        List<String> failures = new ArrayList<>();
        long first = node * (long) DEVICES_PER_NODE;
        KernelContext ctx = MeshRun.context(groups, device, "probe");
        for (List<Long> participants : List.of(List.of(0L, 1L, 2L, 3L), List.of(first, first + 1))) {
            String expected = participants.size() == NODES * DEVICES_PER_NODE ? "NetworkTensorStore"
                : wholeNode ? "MemoryTensorStore" : "FileTensorStore";
            try (TensorStore store = ctx.store("probe-" + participants, participants)) {
                if (!store.getClass().getSimpleName().equals(expected)) {
                    failures.add("device " + device + ": store of " + participants + " is a " + store.getClass().getSimpleName()
                        + ", expected a " + expected);
                }
                store.barrier();
            }
        }
        return failures;
    }

    /** Rows of node 0's two devices to every device of node 1 (a replica each): four pieces between the nodes. */
    private static List<String> transferAcrossNodes(ThreadGroupManager groups, long device) {
        return transfer(groups, device, "across", mesh(0, 1), new Shard(0), mesh(2, 3), new Replicate());
    }

    /** Each node's first device to its second, at once on both nodes (through a Memory or a File store). */
    private static List<String> transferWithinNode(ThreadGroupManager groups, long device, int node) {
        long first = node * (long) DEVICES_PER_NODE;
        return transfer(groups, device, "within-node" + node, mesh(first), new Replicate(), mesh(first + 1), new Replicate());
    }

    private static DeviceMesh mesh(long... ids) {
        return DeviceMesh.of(DeviceKind.CPU, ids);
    }

    /**
     * Runs {@link TransferExecutor} for {@code device} on the transfer from {@code (sourceMesh, from)} to
     * {@code (targetMesh, to)} of a {@link #SHAPE} tensor, checking the target's result against the tensor's slice.
     */
    private static List<String> transfer(ThreadGroupManager groups, long device, String name, DeviceMesh sourceMesh, Placement from,
                                         DeviceMesh targetMesh, Placement to) {
        List<String> failures = new ArrayList<>();
        boolean inSource = sourceMesh.contains(device);
        boolean inTarget = targetMesh.contains(device);
        if (!inSource && !inTarget) {
            return failures;
        }
        RedistributionPlan plan = RedistributionPlanner.plan(Sharding.of(sourceMesh, from), Sharding.of(targetMesh, to), SHAPE);
        if (!plan.sourceSteps().isEmpty() || !plan.targetSteps().isEmpty() || plan.transfer().isEmpty()) {
            failures.add(name + ": the plan is not one transfer: " + plan.allSteps());
            return failures;
        }
        CrossMeshTransfer transfer = plan.transfer().get();
        try (Tensor full = TestTensors.pattern(SHAPE, ScalarType.Float, 3, 41, 1);
             Tensor local = inSource ? slice(full, from, sourceMesh, device) : null;
             Tensor moved = TransferExecutor.run(MeshRun.context(groups, device, "transfer-" + name), transfer, local, null)) {
            if (!inTarget) {
                if (moved != null) {
                    failures.add(name + ": device " + device + " is not in the target mesh but got a result");
                }
                return failures;
            }
            try (Tensor expected = slice(full, to, targetMesh, device)) {
                if (!TestTensors.same(expected, moved)) {
                    failures.add(name + ": device " + device + ": " + TestTensors.diff(expected, moved));
                }
            }
        }
        return failures;
    }

    /** {@code device}'s local tensor under a one-dimensional mesh's placement: the whole tensor, or its balanced shard. */
    private static Tensor slice(Tensor full, Placement placement, DeviceMesh mesh, long device) {
        if (!(placement instanceof Shard shard)) {
            return full.clone();
        }
        long size = SHAPE[shard.dim()] / mesh.deviceIds().size();
        try (Tensor narrowed = full.narrow(shard.dim(), mesh.deviceIds().indexOf(device) * size, size)) {
            return narrowed.contiguous();
        }
    }
}
