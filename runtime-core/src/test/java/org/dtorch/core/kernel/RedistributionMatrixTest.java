package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every source/target placement pair, on 1-D meshes of 1 to 4 devices and on 2x2 and 2x3 meshes, with
 * even and uneven shapes and float32, bfloat16 and int64: scatter a reference tensor from device 0,
 * redistribute, check every local shard against the reference slice under the target layout (partial
 * values summed over their holders), and gather back to device 0.
 */
class RedistributionMatrixTest {
    private static final List<Placement> PLACEMENTS = List.of(Placement.shard(0), Placement.shard(1), Placement.replicate(),
        Placement.partial());
    private static final Map<Boolean, ThreadGroupManager> MANAGERS = new HashMap<>();

    private static synchronized ThreadGroupManager manager(boolean sameDevice) {
        return MANAGERS.computeIfAbsent(sameDevice, s -> new ThreadGroupManager(s, GlobalCommInstanceId.next(), Duration.ofSeconds(30)));
    }

    @AfterAll
    static void closeManagers() {
        MANAGERS.values().forEach(ThreadGroupManager::close);
    }

    @TestFactory
    Stream<DynamicTest> everyPlacementPair() {
        List<DeviceMesh> meshes = new ArrayList<>();
        for (int n = 1; n <= 4; n++) {
            meshes.add(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {n}, List.of()));
        }
        meshes.add(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp")));
        meshes.add(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of("dp", "tp")));
        List<DynamicTest> tests = new ArrayList<>();
        for (boolean sameDevice : new boolean[] {false, true}) {
            for (DeviceMesh mesh : meshes) {
                int devices = mesh.count();
                for (long[] shape : List.of(new long[] {2L * devices, 2L * devices}, new long[] {2L * devices + 1, devices + 1})) {
                    for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                        String name = (sameDevice ? "same-device" : "gloo") + " " + Arrays.toString(mesh.shape()) + " "
                            + Arrays.toString(shape) + " " + TorchTensors.dtypeName(dtype);
                        tests.add(DynamicTest.dynamicTest(name, () -> allPairs(manager(sameDevice), mesh, shape, dtype)));
                    }
                }
            }
        }
        return tests.stream();
    }

    private static void allPairs(ThreadGroupManager groups, DeviceMesh mesh, long[] shape, ScalarType dtype) {
        List<List<Placement>> sequences = sequences(mesh.ndim());
        List<String> failures = new ArrayList<>();
        try (Tensor reference = TestTensors.pattern(shape, dtype, 0, 37, 0)) {
            for (List<Placement> from : sequences) {
                for (List<Placement> to : sequences) {
                    String failure = check(groups, reference, shape, new Sharding(mesh, from), new Sharding(mesh, to));
                    if (failure != null) {
                        failures.add(from + " -> " + to + ": " + failure);
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    /** Checks one pair; returns what was wrong, or null. */
    static String check(ThreadGroupManager groups, Tensor reference, long[] shape, Sharding source, Sharding target) {
        long holder = source.mesh().deviceIds().getFirst();
        DistributedScatter scatter = new DistributedScatter(holder, source, shape);
        ConvertKernel convert = ConvertKernel.of(source, target, shape);
        DistributedGather gather = new DistributedGather(target, holder, shape);
        String scatterOp = MeshRun.newOperation();
        String convertOp = MeshRun.newOperation();
        String gatherOp = MeshRun.newOperation();
        List<Long> devices = new ArrayList<>(source.mesh().deviceIds());
        devices.addAll(target.mesh().deviceIds());
        devices.add(holder);
        Map<Long, Tensor[]> results = MeshRun.onDevices(devices, (device, index) -> {
            boolean inSource = source.mesh().contains(device);
            boolean inTarget = target.mesh().contains(device);
            Tensor local = inSource || device == holder
                ? scatter.run(MeshRun.context(groups, device, scatterOp), device == holder ? reference : null) : null;
            Tensor converted = inSource || inTarget ? convert.run(MeshRun.context(groups, device, convertOp), local) : null;
            Tensor full = inTarget || device == holder ? gather.run(MeshRun.context(groups, device, gatherOp), converted) : null;
            if (local != null) {
                local.close();
            }
            return new Tensor[] {converted, full};
        });
        try {
            String problem = checkShards(reference, shape, target, results);
            if (problem != null) {
                return problem;
            }
            Tensor gathered = results.get(holder)[1];
            return TestTensors.same(reference, gathered) ? null : "gather: " + TestTensors.diff(reference, gathered);
        } finally {
            results.values().forEach(pair -> Arrays.stream(pair).filter(t -> t != null).forEach(Tensor::close));
        }
    }

    /** Every device's shard equals the reference slice; partial shards summed over the devices that share them. */
    private static String checkShards(Tensor reference, long[] shape, Sharding target, Map<Long, Tensor[]> results) {
        DeviceMesh mesh = target.mesh();
        List<Placement> asReplicated = target.placements().stream().map(p -> p.isPartial() ? (Placement) Placement.replicate() : p).toList();
        ShardLayout layout = ShardLayout.of(shape, new Sharding(mesh, asReplicated));
        for (long device : mesh.deviceIds()) {
            Tensor sum = null;
            int[] coords = mesh.coordinates(device);
            for (long other : mesh.deviceIds()) {
                int[] otherCoords = mesh.coordinates(other);
                boolean sharesSlice = true;
                for (int i = 0; i < coords.length; i++) {
                    sharesSlice &= target.placement(i).isPartial() || coords[i] == otherCoords[i];
                }
                if (sharesSlice) {
                    Tensor local = results.get(other)[0];
                    if (sum == null) {
                        sum = local.clone();
                    } else {
                        sum.add_(local);
                    }
                }
            }
            try (Tensor expected = layout.localSlice(reference, device); Tensor actual = sum) {
                if (!TestTensors.same(expected.contiguous(), actual)) {
                    return "device " + device + ": " + TestTensors.diff(expected, actual);
                }
            }
        }
        return null;
    }

    private static List<List<Placement>> sequences(int meshDims) {
        List<List<Placement>> all = new ArrayList<>();
        all.add(List.of());
        for (int d = 0; d < meshDims; d++) {
            List<List<Placement>> longer = new ArrayList<>();
            for (List<Placement> prefix : all) {
                for (Placement p : PLACEMENTS) {
                    List<Placement> next = new ArrayList<>(prefix);
                    next.add(p);
                    longer.add(next);
                }
            }
            all = longer;
        }
        return all;
    }
}
