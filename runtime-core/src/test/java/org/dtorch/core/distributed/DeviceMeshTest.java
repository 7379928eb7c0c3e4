package org.dtorch.core.distributed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;

class DeviceMeshTest {
    private static final DeviceMesh MESH = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of("dp", "tp"));

    @Test
    void shouldNumberDevicesRowMajor() {
        assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L), MESH.deviceIds());
        assertArrayEquals(new int[] {1, 2}, MESH.coordinates(5));
        assertEquals(4, MESH.deviceAt(1, 1));
        assertEquals("DeviceMesh(cpu, [[0, 1, 2], [3, 4, 5]], dims=[dp, tp])", MESH.toString());
        assertEquals(2, MESH.ndim());
        assertEquals(6, MESH.count());
    }

    @Test
    void shouldGiveTheGroupAlongEachDimension() {
        assertEquals(List.of(3L, 4L, 5L), MESH.groupAlong(1, 4));
        assertEquals(List.of(1L, 4L), MESH.groupAlong(0, 4));
        assertEquals(List.of(2L, 5L), MESH.groupAlong(MESH.dimIndex("dp"), 2));
    }

    @Test
    void shouldSliceSubMeshesByName() {
        assertEquals(List.of(3L, 4L, 5L), MESH.subMesh(4, "tp").deviceIds());
        assertEquals(List.of("tp"), MESH.subMesh(4, "tp").dimNames());
        assertEquals(List.of(List.of(0L, 3L), List.of(1L, 4L), List.of(2L, 5L)),
            MESH.subMeshes("dp").stream().map(DeviceMesh::deviceIds).toList());
        DeviceMesh transposed = MESH.subMesh(0, "tp", "dp");
        assertEquals(List.of(0L, 3L, 1L, 4L, 2L, 5L), transposed.deviceIds());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> MESH.subMesh(0, "pp")).getMessage().contains("[dp, tp]"));
    }

    @Test
    void shouldSliceSubMeshesByIndexWithoutNames() {
        DeviceMesh unnamed = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of());
        assertEquals(List.of(3L, 4L, 5L), unnamed.subMesh(4, new int[] {1}).deviceIds());
        assertEquals(List.of(0L, 3L, 1L, 4L, 2L, 5L), unnamed.subMesh(0, new int[] {1, 0}).deviceIds());
        assertEquals(MESH.subMesh(2, "dp", "tp").deviceIds(), MESH.subMesh(2, new int[] {0, 1}).deviceIds());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> unnamed.subMesh(0, new int[] {2})).getMessage()
            .contains("mesh dimension 2 is out of range"));
    }

    @Test
    void shouldAcceptExplicitIdsAndRejectBadMeshes() {
        DeviceMesh custom = DeviceMesh.of(DeviceKind.CUDA, new int[] {2, 2}, new long[] {7, 5, 3, 1}, List.of());
        assertEquals(List.of(3L, 1L), custom.groupAlong(1, 1));
        assertThrows(IllegalArgumentException.class, () -> DeviceMesh.of(DeviceKind.CPU, new int[] {2, 2}, new long[] {0, 1, 2}, List.of()));
        assertThrows(IllegalArgumentException.class, () -> DeviceMesh.of(DeviceKind.CPU, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2}, List.of("a", "b")));
        assertThrows(IllegalArgumentException.class, () -> MESH.coordinates(9));
    }

    @Test
    void shouldRefuseShapesWhoseDeviceCountOverflowsAndNullNames() {
        int[] huge = {1 << 16, 1 << 16, 1 << 16, 1 << 16};
        IllegalArgumentException made = assertThrows(IllegalArgumentException.class, () -> DeviceMesh.initDeviceMesh(DeviceKind.CPU, huge, List.of()));
        assertTrue(made.getMessage().contains("[65536, 65536, 65536, 65536]"), made.getMessage());
        assertThrows(IllegalArgumentException.class, () -> DeviceMesh.of(DeviceKind.CPU, huge, new long[0], List.of()));
        NullPointerException name = assertThrows(NullPointerException.class,
            () -> DeviceMesh.of(DeviceKind.CPU, new int[] {2, 1}, new long[] {0, 1}, java.util.Arrays.asList("dp", null)));
        assertEquals("mesh dimension name 1 is null", name.getMessage());
    }

    @Test
    void shouldPrintPlacementsLikeDTorch() {
        assertEquals("S(0)", Placement.shard(0).toString());
        assertEquals("R", Placement.replicate().toString());
        assertEquals("P(sum)", Placement.partial().toString());
        assertEquals("P(max)", Placement.partial(ReduceOpType.MAX).toString());
        assertEquals(new Replicate(), Placement.replicate());
        assertThrows(IllegalArgumentException.class, () -> Placement.shard(-1));
    }
}
