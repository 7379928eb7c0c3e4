package org.dtorch.polyglot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.RuntimeOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** How a Python mesh's ids become the runtime's logical devices; no runtime needed. */
@Timeout(30)
class MeshIdsTest {
    private static final RuntimeOptions CUDA_SAME_DEVICE = options(DeviceKind.CUDA, 4, true);

    private static RuntimeOptions options(DeviceKind kind, int devices, boolean sameDevice) {
        return new RuntimeOptions(kind, devices, sameDevice, false, Duration.ofSeconds(30), Duration.ofSeconds(2));
    }

    @Test
    void shouldMapZeroRepeatedForEveryRankToLogicalDevicesInRowMajorOrder() {
        assertArrayEquals(new long[] {0, 1, 2, 3}, MeshIds.logical(DeviceKind.CUDA, new long[] {0, 0, 0, 0}, CUDA_SAME_DEVICE));
        assertArrayEquals(new long[] {0, 1}, MeshIds.logical(DeviceKind.CUDA, new long[] {0, 0}, CUDA_SAME_DEVICE));
    }

    @Test
    void shouldKeepDistinctIdsAsLogicalIdsOnEveryRuntime() {
        long[] ids = {3, 1, 2, 0};
        assertSame(ids, MeshIds.logical(DeviceKind.CUDA, ids, CUDA_SAME_DEVICE));
        assertSame(ids, MeshIds.logical(DeviceKind.CUDA, ids, options(DeviceKind.CUDA, 4, false)));
        assertSame(ids, MeshIds.logical(DeviceKind.CPU, ids, options(DeviceKind.CPU, 4, true)));
        long[] one = {0};
        assertSame(one, MeshIds.logical(DeviceKind.CUDA, one, CUDA_SAME_DEVICE));
    }

    @Test
    void shouldLeaveRepeatedCpuIdsAndNegativeIdsToTheMeshsOwnCheck() {
        long[] cpu = {0, 0};
        assertSame(cpu, MeshIds.logical(DeviceKind.CPU, cpu, options(DeviceKind.CPU, 4, true)));
        long[] negative = {-1, -1};
        assertSame(negative, MeshIds.logical(DeviceKind.CUDA, negative, CUDA_SAME_DEVICE));
    }

    @Test
    void shouldRefuseRepeatedIdsItCannotMapNamingWhatToWrite() {
        String mixed = assertThrows(IllegalArgumentException.class,
            () -> MeshIds.logical(DeviceKind.CUDA, new long[] {0, 0, 1, 1}, CUDA_SAME_DEVICE)).getMessage();
        assertTrue(mixed.contains("[0, 0, 1, 1]") && mixed.contains("repeats 0 for every rank") && mixed.contains("0..3"), mixed);
        String otherGpu = assertThrows(IllegalArgumentException.class,
            () -> MeshIds.logical(DeviceKind.CUDA, new long[] {1, 1}, CUDA_SAME_DEVICE)).getMessage();
        assertTrue(otherGpu.contains("every rank runs on cuda:0"), otherGpu);
        String tooMany = assertThrows(IllegalArgumentException.class,
            () -> MeshIds.logical(DeviceKind.CUDA, new long[] {0, 0, 0, 0, 0}, CUDA_SAME_DEVICE)).getMessage();
        assertTrue(tooMany.contains("5 ranks on cuda:0") && tooMany.contains("--devices cuda:5 --same-device"), tooMany);
        String distinctGpus = assertThrows(IllegalArgumentException.class,
            () -> MeshIds.logical(DeviceKind.CUDA, new long[] {0, 0}, options(DeviceKind.CUDA, 2, false))).getMessage();
        assertTrue(distinctGpus.contains("needs the same-device runtime") && distinctGpus.contains("--devices cuda:2 --same-device"),
            distinctGpus);
    }

    @Test
    void shouldNameTheLauncherFlagWhenTheMeshKindIsNotTheRuntimes() {
        assertNull(MeshIds.kindMismatch(DeviceKind.CPU, options(DeviceKind.CPU, 4, false)));
        assertNull(MeshIds.kindMismatch(DeviceKind.CUDA, CUDA_SAME_DEVICE));
        String cudaOnCpu = MeshIds.kindMismatch(DeviceKind.CUDA, options(DeviceKind.CPU, 4, false));
        assertTrue(cudaOnCpu.contains("this runtime has 4 cpu devices") && cudaOnCpu.contains("./dtorch run --devices cuda:N --same-device"),
            cudaOnCpu);
    }

    @Test
    void shouldTakeACpuMeshOnACudaRuntimeAsItsWorkersHostMemory() {
        assertNull(MeshIds.kindMismatch(DeviceKind.CPU, CUDA_SAME_DEVICE));
        assertNull(MeshIds.kindMismatch(DeviceKind.CPU, options(DeviceKind.CUDA, 2, false)));
        assertArrayEquals(new long[] {2, 3}, MeshIds.logical(DeviceKind.CPU, new long[] {2, 3}, CUDA_SAME_DEVICE));
    }
}
