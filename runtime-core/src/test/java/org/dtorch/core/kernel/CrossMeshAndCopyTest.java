package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.communication.store.MemoryTensorStore;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(120)
class CrossMeshAndCopyTest {
    private static ThreadGroupManager groups;
    private static final DeviceMesh FOUR = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh TWO_ELSEWHERE = DeviceMesh.of(DeviceKind.CPU, 4, 5);
    private static final DeviceMesh TWO_INSIDE = DeviceMesh.of(DeviceKind.CPU, 2, 3);
    private static final DeviceMesh SQUARE = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));
    private static final DeviceMesh THREE = DeviceMesh.of(DeviceKind.CPU, 6, 7, 8);
    private static final DeviceMesh SINGLE = DeviceMesh.of(DeviceKind.CPU, 9);

    @BeforeAll
    static void createGroups() {
        groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(30));
    }

    @AfterAll
    static void closeGroups() {
        groups.close();
    }

    private static void expectRoundTrip(Sharding source, Sharding target) {
        List<String> failures = new ArrayList<>();
        for (long[] shape : List.of(new long[] {8, 6}, new long[] {9, 7})) {
            for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                try (Tensor reference = TestTensors.pattern(shape, dtype, 0, 37, 0)) {
                    String there = RedistributionMatrixTest.check(groups, reference, shape, source, target);
                    String back = RedistributionMatrixTest.check(groups, reference, shape, target, source);
                    if (there != null) {
                        failures.add(source + " -> " + target + " " + java.util.Arrays.toString(shape) + ": " + there);
                    }
                    if (back != null) {
                        failures.add(target + " -> " + source + " " + java.util.Arrays.toString(shape) + ": " + back);
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldMoveBetweenAFourDeviceMeshAndATwoDeviceMesh() {
        expectRoundTrip(Sharding.of(FOUR, Placement.shard(0)), Sharding.of(TWO_ELSEWHERE, Placement.shard(0)));
        expectRoundTrip(Sharding.of(FOUR, Placement.shard(1)), Sharding.of(TWO_ELSEWHERE, Placement.shard(0)));
        expectRoundTrip(Sharding.of(FOUR, Placement.partial()), Sharding.of(TWO_ELSEWHERE, Placement.replicate()));
        expectRoundTrip(Sharding.of(FOUR, Placement.replicate()), Sharding.of(TWO_ELSEWHERE, Placement.partial()));
    }

    @Test
    void shouldMoveBetweenOverlappingMeshesAndMeshesOfOtherShapes() {
        expectRoundTrip(Sharding.of(FOUR, Placement.shard(0)), Sharding.of(TWO_INSIDE, Placement.shard(1)));
        expectRoundTrip(Sharding.of(SQUARE, Placement.shard(0), Placement.shard(1)), Sharding.of(THREE, Placement.shard(0)));
        expectRoundTrip(Sharding.of(SQUARE, Placement.partial(), Placement.shard(0)), Sharding.of(THREE, Placement.shard(1)));
    }

    @Test
    void shouldMoveToASingleDevice() {
        expectRoundTrip(Sharding.of(FOUR, Placement.shard(0)), Sharding.of(SINGLE, Placement.replicate()));
        expectRoundTrip(Sharding.of(SQUARE, Placement.shard(1), Placement.partial()), Sharding.of(SINGLE, Placement.replicate()));
    }

    @Test
    void shouldSendEachTargetOnlyItsOwnShardAndTakeReplicasLocally() {
        long[] shape = {8, 6};
        Sharding source = Sharding.of(FOUR, Placement.replicate());
        Sharding target = Sharding.of(TWO_INSIDE, Placement.shard(0));
        var transfer = ConvertKernel.of(source, target, shape).plan().transfer().orElseThrow();
        // Devices 2 and 3 hold a replica themselves: nothing crosses the store.
        transfer.pieces().forEach(p -> assertEquals(p.sourceDevice(), p.targetDevice(), p.toString()));
        var scatter = new DistributedScatter(9, Sharding.of(FOUR, Placement.shard(0)), shape);
        // (built only to show that the holder need not be in the mesh; executed below)
        try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
            String op = MeshRun.newOperation();
            Map<Long, Tensor> shards = MeshRun.onDevices(List.of(0L, 1L, 2L, 3L, 9L),
                (device, i) -> scatter.run(MeshRun.context(groups, device, op), device == 9 ? reference : null));
            assertNull(shards.get(9L));
            ShardLayout layout = ShardLayout.of(shape, Sharding.of(FOUR, Placement.shard(0)));
            for (long device = 0; device < 4; device++) {
                try (Tensor expected = layout.localSlice(reference, device); Tensor actual = shards.get(device)) {
                    assertTrue(TestTensors.same(expected.contiguous(), actual), TestTensors.diff(expected, actual));
                }
            }
        }
    }

    @Test
    void shouldCopyInPlaceOnTheSameMeshAndAcrossMeshes() {
        int storesBefore = MemoryTensorStore.liveStoreCount();
        long[] shape = {8, 6};
        Sharding sourceSharding = Sharding.of(FOUR, Placement.shard(0));
        for (Sharding destination : List.of(sourceSharding, Sharding.of(FOUR, Placement.shard(1)), Sharding.of(TWO_ELSEWHERE, Placement.shard(1)),
            Sharding.of(TWO_INSIDE, Placement.partial()))) {
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
                    long before = dst == null ? 0 : dst.data_ptr().address();
                    copy.run(MeshRun.context(groups, device, op), dst, src);
                    if (dst != null && dst.data_ptr().address() != before) {
                        throw new AssertionError("CopyKernel must write into the destination tensor");
                    }
                    return dst;
                });
                if (destination.hasPartial()) {
                    try (Tensor sum = written.get(2L).add(written.get(3L))) {
                        assertTrue(TestTensors.same(reference, sum), destination + ": " + TestTensors.diff(reference, sum));
                    }
                }
                for (long device : destination.mesh().deviceIds()) {
                    try (Tensor actual = written.get(device); Tensor expected = destinationLayout.localSlice(reference, device)) {
                        assertTrue(destination.hasPartial() || TestTensors.same(expected.contiguous(), actual),
                            destination + " device " + device + ": " + TestTensors.diff(expected, actual));
                    }
                }
            }
        }
        assertEquals(storesBefore, MemoryTensorStore.liveStoreCount(), "every operation's store must be released");
    }
}
