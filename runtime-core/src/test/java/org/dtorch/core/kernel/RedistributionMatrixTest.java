package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

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
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every source/target placement pair, on 1-D meshes of 1 to 4 devices and on 2x2 and 2x3 meshes, with
 * even and uneven shapes and float32, bfloat16 and int64: scatter a reference tensor from device 0,
 * redistribute, check every local shard against the reference slice under the target placements, computed
 * here from the definition of the balanced split (partial values summed over their holders), and gather
 * back to device 0.
 *
 * <p>Every build walks every pair on every 1-D mesh in every shape, dtype and backend, and on each 2-D mesh (256 pairs
 * each) on one backend (2x2 on Gloo, 2x3 on the same-device backend) in the uneven shape as float32 and the even shape
 * as int64. The {@code slow} run walks the rest: the 2-D meshes' other backend, shapes and dtypes.
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
        return matrix(false);
    }

    @TestFactory
    @Tag("slow")
    Stream<DynamicTest> everyPlacementPairInEveryShapeAndDtypeOnTwoDimensionalMeshes() {
        return matrix(true);
    }

    /** A 2-D mesh's cases in every build: on one backend each, the uneven shape as float32 and the even one as int64. */
    private static boolean everyBuild(DeviceMesh mesh, boolean sameDevice, boolean uneven, ScalarType dtype) {
        return mesh.ndim() == 1
            || (mesh.count() == 4) != sameDevice && (uneven ? dtype == ScalarType.Float : dtype == ScalarType.Long);
    }

    /** The cases of every build ({@code slow} false), or the others ({@code slow} true). */
    private Stream<DynamicTest> matrix(boolean slow) {
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
                        if (everyBuild(mesh, sameDevice, shape[0] % devices != 0, dtype) == slow) {
                            continue;
                        }
                        String name = (sameDevice ? "same-device" : "gloo") + " " + Arrays.toString(mesh.shape()) + " "
                            + Arrays.toString(shape) + " " + TorchTensors.dtypeName(dtype);
                        tests.add(DynamicTest.dynamicTest(name, () -> allPairs(manager(sameDevice), mesh, shape, dtype)));
                    }
                }
            }
        }
        return tests.stream();
    }

    /** The hand-written expectation itself, pinned to literal slices, and one real redistribution onto it. */
    @Test
    void shouldSplitTenRowsOverFourDevicesThreeThreeTwoTwo() {
        DeviceMesh line = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {4}, List.of());
        long[] shape = {10};
        try (Tensor reference = TestTensors.pattern(shape, ScalarType.Long, 0, 100, 0)) {
            assertEquals(List.of("[0.0, 1.0, 2.0]", "[3.0, 4.0, 5.0]", "[6.0, 7.0]", "[8.0, 9.0]"),
                expectedValues(reference, shape, line, List.of(Placement.shard(0))));
            assertNull(check(manager(false), reference, shape, Sharding.of(line, Placement.replicate()), Sharding.of(line, Placement.shard(0))));
        }
    }

    /** S(0) on both dimensions of a 2x2 mesh: 5 rows go 3 and 2 over "dp" first, then each part over "tp". */
    @Test
    void shouldSplitNestedShardingByTheOuterMeshDimensionFirst() {
        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));
        long[] shape = {5, 2};
        List<Placement> nested = List.of(Placement.shard(0), Placement.shard(0));
        try (Tensor reference = TestTensors.pattern(shape, ScalarType.Long, 0, 100, 0)) {
            assertEquals(List.of("[0.0, 1.0, 2.0, 3.0]", "[4.0, 5.0]", "[6.0, 7.0]", "[8.0, 9.0]"),
                expectedValues(reference, shape, square, nested));
            assertNull(check(manager(false), reference, shape, Sharding.of(square, Placement.replicate(), Placement.replicate()),
                new Sharding(square, nested)));
        }
    }

    private static List<String> expectedValues(Tensor reference, long[] shape, DeviceMesh mesh, List<Placement> placements) {
        List<String> values = new ArrayList<>();
        for (long device : mesh.deviceIds()) {
            try (Tensor slice = expectedSlice(reference, shape, mesh, placements, device)) {
                values.add(TestTensors.values(slice));
            }
        }
        return values;
    }

    static void allPairs(ThreadGroupManager groups, DeviceMesh mesh, long[] shape, ScalarType dtype) {
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
        for (long device : mesh.deviceIds()) {
            Tensor sum = null;
            int[] coords = coordinates(mesh, device);
            for (long other : mesh.deviceIds()) {
                int[] otherCoords = coordinates(mesh, other);
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
            try (Tensor expected = expectedSlice(reference, shape, mesh, target.placements(), device); Tensor actual = sum) {
                if (!TestTensors.same(expected.contiguous(), actual)) {
                    return "device " + device + ": " + TestTensors.diff(expected, actual);
                }
            }
        }
        return null;
    }

    /**
     * The slice of {@code reference} that {@code device} holds, written out from the definition rather than
     * taken from {@code ShardLayout}: mesh dimensions are applied outer first, and {@code S(d)} on a mesh
     * dimension of {@code n} devices cuts the part of tensor dimension {@code d} that is left into {@code n}
     * pieces whose sizes differ by at most one, the larger ones first (10 over 4 is 3, 3, 2, 2). {@code R} and
     * {@code P} keep the whole part (partial values are compared after summing).
     */
    static Tensor expectedSlice(Tensor reference, long[] shape, DeviceMesh mesh, List<Placement> placements, long device) {
        long[] start = new long[shape.length];
        long[] length = shape.clone();
        int[] coords = coordinates(mesh, device);
        for (int m = 0; m < placements.size(); m++) {
            if (placements.get(m) instanceof Shard shard) {
                int d = shard.dim();
                long pieces = mesh.shape()[m];
                long small = length[d] / pieces;
                long larger = length[d] % pieces; // how many pieces get one more element
                int k = coords[m];
                start[d] += k * small + Math.min(k, larger);
                length[d] = small + (k < larger ? 1 : 0);
            }
        }
        Tensor slice = new Tensor(reference);
        for (int d = 0; d < shape.length; d++) {
            Tensor narrower = slice.narrow(d, start[d], length[d]);
            slice.close();
            slice = narrower;
        }
        return slice;
    }

    /** Row-major coordinates of {@code device} from its position in the mesh's id list. */
    private static int[] coordinates(DeviceMesh mesh, long device) {
        int index = mesh.deviceIds().indexOf(device);
        int[] shape = mesh.shape();
        int[] coords = new int[shape.length];
        for (int m = shape.length - 1; m >= 0; m--) {
            coords[m] = index % shape[m];
            index /= shape[m];
        }
        return coords;
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
