package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Counts the collectives each redistribution runs, per rank, as DTensor's tests do with their comm-mode counter. */
@Timeout(120)
class CollectiveCountTest {
    private static final DeviceMesh LINE = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh SQUARE = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));

    /** Collectives per rank of one convert from {@code from} to {@code to}; groups are created (and their barrier run) beforehand. */
    private static Map<CollectiveKind, Long> countPerRank(ThreadGroupManager groups, DeviceMesh mesh, List<Placement> from, List<Placement> to) {
        long[] shape = {8, 8};
        Sharding source = new Sharding(mesh, from);
        ConvertKernel convert = ConvertKernel.of(source, new Sharding(mesh, to), shape);
        ShardLayout layout = ShardLayout.of(shape, source);
        try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
            for (int dim = 0; dim < mesh.ndim(); dim++) {
                int d = dim;
                MeshRun.onDevices(mesh.deviceIds(), (device, i) -> groups.getThreadGroup(DeviceKind.CPU, mesh.groupAlong(d, device), device));
            }
            Map<CollectiveKind, Long> before = groups.collectiveCounter().snapshot();
            String op = MeshRun.newOperation();
            MeshRun.onDevices(mesh.deviceIds(), (device, i) -> {
                try (Tensor local = layout.localSlice(reference, device).contiguous();
                     Tensor out = convert.run(MeshRun.context(groups, device, op), local)) {
                    return out.numel();
                }
            });
            Map<CollectiveKind, Long> perRank = new EnumMap<>(CollectiveKind.class);
            groups.collectiveCounter().snapshot().forEach((kind, count) -> {
                long delta = count - before.get(kind);
                if (delta != 0) {
                    perRank.put(kind, delta / mesh.count());
                }
            });
            return perRank;
        }
    }

    @Test
    void shouldRunExactlyTheCollectiveOfEachStep() {
        try (ThreadGroupManager groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(30))) {
            assertEquals(Map.of(CollectiveKind.ALL_GATHER, 1L), countPerRank(groups, LINE, List.of(Placement.shard(0)), List.of(Placement.replicate())));
            assertEquals(Map.of(CollectiveKind.ALL_TO_ALL, 1L), countPerRank(groups, LINE, List.of(Placement.shard(0)), List.of(Placement.shard(1))));
            assertEquals(Map.of(CollectiveKind.REDUCE_SCATTER, 1L), countPerRank(groups, LINE, List.of(Placement.partial()), List.of(Placement.shard(1))));
            assertEquals(Map.of(CollectiveKind.ALL_REDUCE, 1L), countPerRank(groups, LINE, List.of(Placement.partial()), List.of(Placement.replicate())));
            assertEquals(Map.of(), countPerRank(groups, LINE, List.of(Placement.replicate()), List.of(Placement.shard(0))));
            assertEquals(Map.of(), countPerRank(groups, LINE, List.of(Placement.shard(1)), List.of(Placement.partial())));
            assertEquals(Map.of(), countPerRank(groups, LINE, List.of(Placement.replicate()), List.of(Placement.partial())));
            // On a 2-D mesh, a change on one mesh dimension runs one collective in that dimension's groups only
            // (each rank belongs to exactly one of them).
            assertEquals(Map.of(CollectiveKind.ALL_GATHER, 1L),
                countPerRank(groups, SQUARE, List.of(Placement.shard(0), Placement.shard(1)), List.of(Placement.shard(0), Placement.replicate())));
            assertEquals(Map.of(CollectiveKind.ALL_TO_ALL, 1L),
                countPerRank(groups, SQUARE, List.of(Placement.replicate(), Placement.shard(0)), List.of(Placement.replicate(), Placement.shard(1))));
            // Nested S(0) over both mesh dimensions to S(0) on the outer only: one all-gather on the inner.
            assertEquals(Map.of(CollectiveKind.ALL_GATHER, 1L),
                countPerRank(groups, SQUARE, List.of(Placement.shard(0), Placement.shard(0)), List.of(Placement.shard(0), Placement.replicate())));
        }
    }
}
