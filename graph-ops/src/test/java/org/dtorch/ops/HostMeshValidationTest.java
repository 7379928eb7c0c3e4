package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Meshes named with a device kind on a CPU runtime: CPU meshes are the runtime's meshes as before,
 * and CUDA meshes are refused before anything runs, by the API and by the runtime.
 */
@Timeout(60)
class HostMeshValidationTest extends FourDeviceRuntime {
    @Test
    void shouldNameTheRuntimesOwnMeshesWithTheirKind() {
        assertEquals(dt.mesh(0, 1), dt.mesh(DeviceKind.CPU, 0, 1));
        assertEquals(dt.initDeviceMesh(new int[] {2, 2}, "dp", "tp"), dt.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, "dp", "tp"));
    }

    @Test
    void shouldRefuseCudaMeshesInACpuRuntime() {
        IllegalArgumentException named = assertThrows(IllegalArgumentException.class, () -> dt.mesh(DeviceKind.CUDA, 0, 1));
        assertTrue(named.getMessage().contains("is not made of this runtime's cpu devices"), named.getMessage());
        assertThrows(IllegalArgumentException.class, () -> dt.initDeviceMesh(DeviceKind.CUDA, new int[] {2, 2}));
        DeviceMesh gpus = DeviceMesh.of(DeviceKind.CUDA, 0, 1, 2, 3);
        assertThrows(IllegalArgumentException.class, () -> dt.zeros(new long[] {4}, gpus, Placement.shard(0)));
        try (DTensor x = dt.ones(new long[] {8, 6}, dt.defaultMesh(), Placement.shard(0))) {
            IllegalArgumentException moved = assertThrows(IllegalArgumentException.class, () -> x.redistribute(gpus, Placement.replicate()));
            assertTrue(moved.getMessage().contains("is not made of this runtime's cpu devices"), moved.getMessage());
            try (Tensor sum = x.sum().toTorch()) {
                assertEquals(48.0, sum.item_double(), "the runtime still works after the refusal");
            }
        }
    }
}
