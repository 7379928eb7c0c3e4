package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * Redistribution with zero-size shards: every source/target placement pair on 1-D meshes of 2 to 4 devices and on 2x2
 * and 2x3 meshes, with dimensions shorter than the devices that split them (nested sharding included) and with no
 * element at all, on Gloo and on the same-device backend (all-gathers with empty pieces, reduce-scatters to empty
 * outputs, all-to-alls, local slices, partial values, scatter and gather); then moves between meshes and copies in
 * place with empty shards on either side. Every local shard is compared with the reference slice written out from the
 * balanced split's definition ({@link RedistributionMatrixTest#expectedSlice}).
 *
 * <p>Every build walks every pair on the 1-D meshes in every shape, dtype and backend, and on each 2-D mesh (256 pairs
 * each) on one backend (2x2 on Gloo, 2x3 on the same-device backend) in every shape with one dtype (float32 and int64
 * in turn); the {@code slow} run walks the rest.
 */
@Timeout(300)
class EmptyShardsRedistributionTest {
    private static final Map<Boolean, ThreadGroupManager> MANAGERS = new HashMap<>();
    private static final DeviceMesh FOUR = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh SQUARE = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));
    private static final DeviceMesh THREE_ELSEWHERE = DeviceMesh.of(DeviceKind.CPU, 6, 7, 8);
    private static final DeviceMesh TWO_INSIDE = DeviceMesh.of(DeviceKind.CPU, 2, 3);

    private static synchronized ThreadGroupManager manager(boolean sameDevice) {
        return MANAGERS.computeIfAbsent(sameDevice, s -> new ThreadGroupManager(s, GlobalCommInstanceId.next(), Duration.ofSeconds(30)));
    }

    @AfterAll
    static void closeManagers() {
        MANAGERS.values().forEach(ThreadGroupManager::close);
    }

    @TestFactory
    Stream<DynamicTest> everyPlacementPairWithEmptyShards() {
        return matrix(false);
    }

    @TestFactory
    @Tag("slow")
    Stream<DynamicTest> everyPlacementPairWithEmptyShardsInBothDtypesOnTwoDimensionalMeshes() {
        return matrix(true);
    }

    /** The cases of every build ({@code slow} false), or the others ({@code slow} true): see the class comment. */
    private static Stream<DynamicTest> matrix(boolean slow) {
        List<DeviceMesh> meshes = new ArrayList<>();
        for (int n = 2; n <= 4; n++) {
            meshes.add(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {n}, List.of()));
        }
        meshes.add(SQUARE);
        meshes.add(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of("dp", "tp")));
        List<DynamicTest> tests = new ArrayList<>();
        for (boolean sameDevice : new boolean[] {false, true}) {
            for (DeviceMesh mesh : meshes) {
                int devices = mesh.count();
                // Both dimensions shorter than the devices; one row; nothing at all.
                List<long[]> shapes = List.of(new long[] {devices - 1, devices - 1}, new long[] {1, 3}, new long[] {0, 2});
                for (long[] shape : shapes) {
                    for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Long)) {
                        boolean everyBuild = mesh.ndim() == 1 || (mesh.count() == 4) != sameDevice
                            && (dtype == ScalarType.Float) == (shapes.indexOf(shape) % 2 == 0);
                        if (everyBuild == slow) {
                            continue;
                        }
                        String name = (sameDevice ? "same-device" : "gloo") + " " + Arrays.toString(mesh.shape()) + " "
                            + Arrays.toString(shape) + " " + TorchTensors.dtypeName(dtype);
                        tests.add(DynamicTest.dynamicTest(name, () -> RedistributionMatrixTest.allPairs(manager(sameDevice), mesh, shape, dtype)));
                    }
                }
            }
        }
        return tests.stream();
    }

    @Test
    void shouldGiveTheLastDevicesEmptyShardsOnNestedSharding() {
        // 3 rows over "dp" are 2 and 1, then over "tp" 1, 1 and 1, 0.
        ShardLayout layout = ShardLayout.of(new long[] {3, 4}, Sharding.of(SQUARE, Placement.shard(0), Placement.shard(0)));
        long[][] expected = {{0, 1}, {1, 1}, {2, 1}, {3, 0}};
        for (long device = 0; device < 4; device++) {
            assertEquals(expected[(int) device][0], layout.offsets(device)[0], "offset of device " + device);
            assertArrayEquals(new long[] {expected[(int) device][1], 4}, layout.localShape(device), "shape of device " + device);
        }
        try (Tensor reference = TestTensors.pattern(new long[] {3, 4}, ScalarType.Float, 0, 37, 0)) {
            String failure = RedistributionMatrixTest.check(manager(false), reference, new long[] {3, 4},
                Sharding.of(SQUARE, Placement.replicate(), Placement.replicate()), Sharding.of(SQUARE, Placement.shard(0), Placement.shard(0)));
            assertEquals(null, failure);
        }
    }

    @Test
    void shouldMoveEmptyShardsBetweenMeshes() {
        List<String> failures = new ArrayList<>();
        List<Sharding[]> pairs = List.of(
            new Sharding[] {Sharding.of(FOUR, Placement.shard(0)), Sharding.of(THREE_ELSEWHERE, Placement.shard(0))},
            new Sharding[] {Sharding.of(FOUR, Placement.shard(0)), Sharding.of(TWO_INSIDE, Placement.shard(1))},
            new Sharding[] {Sharding.of(SQUARE, Placement.shard(0), Placement.shard(1)), Sharding.of(THREE_ELSEWHERE, Placement.shard(0))},
            new Sharding[] {Sharding.of(SQUARE, Placement.partial(), Placement.shard(0)), Sharding.of(THREE_ELSEWHERE, Placement.shard(1))},
            new Sharding[] {Sharding.of(FOUR, Placement.partial()), Sharding.of(THREE_ELSEWHERE, Placement.partial())});
        for (long[] shape : List.of(new long[] {2, 1}, new long[] {3, 2}, new long[] {0, 3})) {
            for (Sharding[] pair : pairs) {
                try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
                    String there = RedistributionMatrixTest.check(manager(false), reference, shape, pair[0], pair[1]);
                    String back = RedistributionMatrixTest.check(manager(true), reference, shape, pair[1], pair[0]);
                    if (there != null) {
                        failures.add(pair[0] + " -> " + pair[1] + " " + Arrays.toString(shape) + ": " + there);
                    }
                    if (back != null) {
                        failures.add(pair[1] + " -> " + pair[0] + " " + Arrays.toString(shape) + ": " + back);
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldCopyInPlaceIntoAndFromEmptyShards() {
        long[] shape = {2, 3};
        Sharding sourceSharding = Sharding.of(FOUR, Placement.shard(0));
        for (Sharding destination : List.of(sourceSharding, Sharding.of(FOUR, Placement.shard(1)), Sharding.of(THREE_ELSEWHERE, Placement.shard(0)),
            Sharding.of(TWO_INSIDE, Placement.replicate()))) {
            try (Tensor reference = TestTensors.pattern(shape, ScalarType.Long, 0, 37, 0)) {
                ShardLayout sourceLayout = ShardLayout.of(shape, sourceSharding);
                ShardLayout destinationLayout = ShardLayout.of(shape, destination);
                CopyKernel copy = new CopyKernel(destination, sourceSharding, shape);
                String op = MeshRun.newOperation();
                List<Long> devices = new ArrayList<>(FOUR.deviceIds());
                devices.addAll(destination.mesh().deviceIds());
                Map<Long, Tensor> written = MeshRun.onDevices(devices, (device, i) -> {
                    Tensor src = FOUR.contains(device) ? sourceLayout.localSlice(reference, device).contiguous() : null;
                    Tensor dst = destination.mesh().contains(device)
                        ? TestTensors.pattern(destinationLayout.localShape(device), ScalarType.Long, 0, 1, -1) : null;
                    copy.run(MeshRun.context(manager(false), device, op), dst, src);
                    return dst;
                });
                for (long device : destination.mesh().deviceIds()) {
                    try (Tensor actual = written.get(device); Tensor expected = destinationLayout.localSlice(reference, device)) {
                        assertTrue(TestTensors.same(expected.contiguous(), actual), destination + " device " + device + ": "
                            + TestTensors.diff(expected, actual));
                    }
                }
            }
        }
    }
}
