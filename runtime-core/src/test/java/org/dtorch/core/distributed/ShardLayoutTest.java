package org.dtorch.core.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;

class ShardLayoutTest {
    private static final DeviceMesh MESH = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of());

    @Test
    void shouldSplitWithTheBalancedSplit() {
        ShardLayout layout = ShardLayout.of(new long[] {10, 4}, Sharding.of(DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3), Placement.shard(0)));
        assertArrayEquals(new long[] {3, 4}, layout.localShape(0));
        assertArrayEquals(new long[] {2, 4}, layout.localShape(3));
        assertArrayEquals(new long[] {8, 0}, layout.offsets(3));
    }

    @Test
    void shouldNestOneDimensionShardedOverTwoMeshDimensionsOuterFirst() {
        // 13 rows: mesh dim 0 (2 ways) gives 7 and 6; mesh dim 1 (3 ways) then splits 7 into 3,2,2 and 6 into 2,2,2.
        ShardLayout layout = ShardLayout.of(new long[] {13, 5}, Sharding.of(MESH, Placement.shard(0), Placement.shard(0)));
        long[][] expected = {{0, 3}, {3, 2}, {5, 2}, {7, 2}, {9, 2}, {11, 2}};
        for (long device = 0; device < 6; device++) {
            assertEquals(expected[(int) device][0], layout.offsets(device)[0], "offset of device " + device);
            assertEquals(expected[(int) device][1], layout.localShape(device)[0], "rows of device " + device);
        }
    }

    @Test
    void shouldKeepFullShapesForPartialAndReplicate() {
        ShardLayout layout = ShardLayout.of(new long[] {4, 6}, Sharding.of(MESH, Placement.partial(), Placement.shard(1)));
        assertArrayEquals(new long[] {4, 2}, layout.localShape(4));
        assertArrayEquals(new long[] {0, 2}, layout.offsets(4));
        assertEquals(8, layout.localNumel(4));
    }

    @Test
    void shouldRejectShardsOutOfRangeAndDimensionsShorterThanTheMesh() {
        String outOfRange = assertThrows(IllegalArgumentException.class,
            () -> ShardLayout.of(new long[] {6}, Sharding.of(MESH, Placement.shard(1), Placement.replicate()))).getMessage();
        assertTrue(outOfRange.contains("S(1) on mesh dimension 0 is out of range for a tensor of shape [6]"), outOfRange);
        String tooShort = assertThrows(IllegalArgumentException.class,
            () -> ShardLayout.of(new long[] {5, 2}, Sharding.of(MESH, Placement.shard(0), Placement.shard(0)))).getMessage();
        assertTrue(tooShort.contains("split down to 2 elements by outer mesh dimensions but mesh dimension 1 splits it 3 ways"), tooShort);
    }
}
