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
    void shouldRejectShardsOutOfRangeAndNegativeDimensions() {
        String outOfRange = assertThrows(IllegalArgumentException.class,
            () -> ShardLayout.of(new long[] {6}, Sharding.of(MESH, Placement.shard(1), Placement.replicate()))).getMessage();
        assertTrue(outOfRange.contains("S(1) on mesh dimension 0 is out of range for a tensor of shape [6]"), outOfRange);
        String negative = assertThrows(IllegalArgumentException.class,
            () -> ShardLayout.of(new long[] {-1, 2}, Sharding.of(MESH, Placement.shard(0), Placement.replicate()))).getMessage();
        assertTrue(negative.contains("shape [-1, 2] has a negative dimension"), negative);
    }

    @Test
    void shouldGiveDevicesBeyondTheElementsEmptyShards() {
        DeviceMesh line = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
        ShardLayout two = ShardLayout.of(new long[] {2, 8}, Sharding.of(line, Placement.shard(0)));
        long[][] rowsAndOffsets = {{1, 0}, {1, 1}, {0, 2}, {0, 2}};
        for (long device = 0; device < 4; device++) {
            assertArrayEquals(new long[] {rowsAndOffsets[(int) device][0], 8}, two.localShape(device), "device " + device);
            assertArrayEquals(new long[] {rowsAndOffsets[(int) device][1], 0}, two.offsets(device), "device " + device);
        }
        assertEquals(0, two.localNumel(3));
        ShardLayout none = ShardLayout.of(new long[] {0, 8}, Sharding.of(line, Placement.shard(0)));
        for (long device = 0; device < 4; device++) {
            assertArrayEquals(new long[] {0, 8}, none.localShape(device));
            assertArrayEquals(new long[] {0, 0}, none.offsets(device));
        }
    }

    @Test
    void shouldNestEmptyShardsOnTwoByTwoAndTwoByThreeMeshes() {
        // 3 rows on a 2x2 mesh, S(0) on both: "dp" gives 2 and 1, "tp" then 1, 1 and 1, 0.
        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of());
        ShardLayout onSquare = ShardLayout.of(new long[] {3, 5}, Sharding.of(square, Placement.shard(0), Placement.shard(0)));
        long[][] squareRows = {{0, 1}, {1, 1}, {2, 1}, {3, 0}};
        for (long device = 0; device < 4; device++) {
            assertEquals(squareRows[(int) device][0], onSquare.offsets(device)[0], "offset of device " + device);
            assertEquals(squareRows[(int) device][1], onSquare.localShape(device)[0], "rows of device " + device);
        }
        // 5 rows on 2x3: "dp" gives 3 and 2; "tp" then 1, 1, 1 and 1, 1, 0. 3 columns over "tp" alone: 1, 1, 1.
        ShardLayout nested = ShardLayout.of(new long[] {5, 2}, Sharding.of(MESH, Placement.shard(0), Placement.shard(0)));
        long[][] rows = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 0}};
        for (long device = 0; device < 6; device++) {
            assertEquals(rows[(int) device][0], nested.offsets(device)[0], "offset of device " + device);
            assertEquals(rows[(int) device][1], nested.localShape(device)[0], "rows of device " + device);
        }
        // 1 row: "dp" gives 1 and 0; the second half of the mesh holds nothing at all.
        ShardLayout one = ShardLayout.of(new long[] {1, 2}, Sharding.of(MESH, Placement.shard(0), Placement.shard(0)));
        assertArrayEquals(new long[] {1, 2}, one.localShape(0));
        for (long device = 1; device < 6; device++) {
            assertEquals(0, one.localNumel(device), "device " + device);
            assertEquals(1, one.offsets(device)[0], "an empty shard starts where the row ends: device " + device);
        }
    }
}
