package org.dtorch.core.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;

/** The parallel mesh: dimension order, size-1 dimensions, every group accessor and the errors. */
class ParallelConfigTest {

    @Test
    void shouldOrderTheDimensionsOutermostFirst() {
        ParallelConfig config = new ParallelConfig(2, 1, 2, 2, 1, 1);
        DeviceMesh mesh = config.deviceMesh(DeviceKind.CPU, 8);
        assertEquals(List.of("dp", "cfg", "ring", "ulysses", "pp", "tp"), mesh.dimNames());
        assertArrayEquals(new int[] {2, 1, 2, 2, 1, 1}, mesh.shape());
        assertEquals(8, config.worldSize());
        // Row-major: rank 5 is dp 1, ring 0, ulysses 1.
        assertArrayEquals(new int[] {1, 0, 0, 1, 0, 0}, mesh.coordinates(5));
    }

    @Test
    void shouldGiveEveryGroupOfARankInCoordinateOrder() {
        // dp 2 x cfg 2 x ring 2 x ulysses 2 x pp 1 x tp 2 over 32 ranks; strides tp 1, pp 2, ulysses 2, ring 4, cfg 8, dp 16.
        ParallelConfig config = new ParallelConfig(2, 2, 2, 2, 1, 2);
        long rank = 16 + 8 + 2 + 1; // dp 1, cfg 1, ring 0, ulysses 1, pp 0, tp 1
        assertEquals(List.of(11L, 27L), config.dpGroup(rank));
        assertEquals(List.of(19L, 27L), config.cfgGroup(rank));
        assertEquals(List.of(27L, 31L), config.ringGroup(rank));
        assertEquals(List.of(25L, 27L), config.ulyssesGroup(rank));
        assertEquals(List.of(25L, 27L, 29L, 31L), config.spGroup(rank));
        assertEquals(List.of(27L), config.ppGroup(rank));
        assertEquals(List.of(26L, 27L), config.tpGroup(rank));
        assertEquals(List.of("ring", "ulysses"), config.spMesh(rank).dimNames());
        assertArrayEquals(new int[] {2, 2}, config.spMesh(rank).shape());
    }

    @Test
    void shouldPartitionTheWorldIntoEachDimensionsGroups() {
        ParallelConfig config = new ParallelConfig(1, 2, 1, 3, 2, 1);
        DeviceMesh mesh = config.deviceMesh(DeviceKind.CPU);
        for (String name : ParallelConfig.DIM_NAMES) {
            for (long rank = 0; rank < config.worldSize(); rank++) {
                List<Long> group = mesh.groupAlong(mesh.dimIndex(name), rank);
                assertTrue(group.contains(rank), name + " group of " + rank + ": " + group);
                for (long member : group) {
                    assertEquals(group, mesh.groupAlong(mesh.dimIndex(name), member), "every member of " + group + " shares it");
                }
            }
        }
        assertEquals(List.of(1L, 3L, 5L), config.ulyssesGroup(3));
        assertEquals(List.of(2L, 3L), config.ppGroup(3));
        assertEquals(List.of(3L, 9L), config.cfgGroup(3));
    }

    @Test
    void shouldKeepSizeOneDimensionsSoEveryNameResolves() {
        ParallelConfig config = new ParallelConfig(1, 1, 1, 1, 1, 1);
        DeviceMesh mesh = config.deviceMesh(DeviceKind.CPU, 1);
        assertEquals(6, mesh.ndim());
        assertEquals(List.of(0L), config.tpGroup(0));
        assertEquals(List.of(0L), mesh.subMesh(0, "ulysses").deviceIds());
    }

    @Test
    void shouldNameEveryFactorWhenTheWorldSizeDiffers() {
        ParallelConfig config = new ParallelConfig(1, 1, 2, 2, 1, 1);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> config.deviceMesh(DeviceKind.CPU, 3));
        assertEquals("ParallelConfig[dp=1, cfg=1, ring=2, ulysses=2, pp=1, tp=1] spans dp * cfg * ring * ulysses * pp * tp"
            + " = 1 * 1 * 2 * 2 * 1 * 1 = 4 devices, but there are 3", e.getMessage());
    }

    @Test
    void shouldRefuseBadDegreesAndRanks() {
        assertEquals("ParallelConfig: ulysses must be >= 1, got 0",
            assertThrows(IllegalArgumentException.class, () -> new ParallelConfig(1, 1, 1, 0, 1, 1)).getMessage());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> new ParallelConfig(65536, 65536, 1, 1, 1, 1))
            .getMessage().contains("more devices than a mesh can number"));
        ParallelConfig config = new ParallelConfig(1, 2, 1, 1, 1, 1);
        assertTrue(assertThrows(IllegalArgumentException.class, () -> config.ringGroup(2)).getMessage()
            .endsWith("rank must be in [0, 2), got 2"));
    }
}
