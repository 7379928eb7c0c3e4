package org.dtorch.core.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;

/**
 * Plans between a CPU mesh and a CUDA mesh: the communication is planned between the CUDA twins
 * of the two meshes, and the plan says so; planning needs no GPU.
 */
class CrossKindPlanTest {
    private static final DeviceMesh ON_GPU = DeviceMesh.of(DeviceKind.CUDA, 0, 1, 2, 3);
    private static final DeviceMesh ON_HOST = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh HOST_PAIR = DeviceMesh.of(DeviceKind.CPU, 2, 3);

    private static RedistributionPlan plan(DeviceMesh from, Placement p, DeviceMesh to, Placement q, long... shape) {
        return RedistributionPlanner.plan(Sharding.of(from, p), Sharding.of(to, q), shape);
    }

    private static List<StepKind> kinds(RedistributionPlan plan) {
        return plan.allSteps().stream().map(RedistributionStep::kind).toList();
    }

    @Test
    void shouldPlanAMoveBetweenKindsAsTheSameMoveBetweenTheCudaTwins() {
        RedistributionPlan down = plan(ON_GPU, Placement.shard(0), ON_HOST, Placement.replicate(), 8, 6);
        RedistributionPlan twin = down.throughDevice().orElseThrow();
        assertEquals(Sharding.of(ON_GPU, Placement.shard(0)), twin.source());
        assertEquals(Sharding.of(ON_GPU, Placement.replicate()), twin.target());
        assertEquals(Sharding.of(ON_HOST, Placement.replicate()), down.target(), "the plan keeps the caller's meshes");
        assertEquals(List.of(StepKind.ALL_GATHER), kinds(down));
        assertTrue(down.transfer().isEmpty(), "same ids: no transfer between meshes");

        RedistributionPlan up = plan(ON_HOST, Placement.replicate(), ON_GPU, Placement.shard(1), 8, 6);
        assertEquals(Sharding.of(ON_GPU, Placement.replicate()), up.throughDevice().orElseThrow().source());
        assertEquals(List.of(StepKind.LOCAL_SLICE), kinds(up));
    }

    @Test
    void shouldReduceAPartialSourceOnTheGpuWhicheverSideItIsOn() {
        assertEquals(List.of(StepKind.REDUCE_SCATTER), kinds(plan(ON_GPU, Placement.partial(), ON_HOST, Placement.shard(0), 8, 6)));
        assertEquals(List.of(StepKind.REDUCE_SCATTER), kinds(plan(ON_HOST, Placement.partial(), ON_GPU, Placement.shard(0), 8, 6)));
        assertEquals(List.of(StepKind.REPLICATE_TO_PARTIAL), kinds(plan(ON_GPU, Placement.replicate(), ON_HOST, Placement.partial(), 8, 6)));
    }

    @Test
    void shouldMoveOnlyTheDeviceWhenIdsAndPlacementsAgree() {
        RedistributionPlan plan = plan(ON_GPU, Placement.shard(0), ON_HOST, Placement.shard(0), 9, 7);
        assertTrue(plan.throughDevice().orElseThrow().isIdentity());
        assertFalse(plan.isIdentity(), "the values still change device");
        assertEquals(List.of(), kinds(plan));
    }

    @Test
    void shouldTransferBetweenDifferentIdsThroughTheGpus() {
        RedistributionPlan plan = plan(ON_GPU, Placement.shard(0), HOST_PAIR, Placement.shard(1), 8, 6);
        CrossMeshTransfer transfer = plan.transfer().orElseThrow();
        assertEquals(DeviceKind.CUDA, transfer.target().sharding().mesh().kind());
        assertEquals(List.of(2L, 3L), transfer.target().sharding().mesh().deviceIds());
        assertEquals(DeviceKind.CPU, plan.target().mesh().kind());
    }

    @Test
    void shouldRefuseAnInvalidRequestNamingBothMeshes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> plan(ON_GPU, Placement.shard(0), ON_HOST, Placement.shard(2), 8, 6));
        assertTrue(e.getMessage().contains("DeviceMesh(cpu") && e.getMessage().contains("DeviceMesh(cuda"), e.getMessage());
        assertTrue(e.getMessage().contains("between cpu and cuda devices"), e.getMessage());
    }

    @Test
    void shouldKeepIdsShapeAndNamesInTheTwin() {
        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));
        DeviceMesh twin = square.withKind(DeviceKind.CUDA);
        assertEquals(DeviceKind.CUDA, twin.kind());
        assertEquals(square.deviceIds(), twin.deviceIds());
        assertEquals(square.dimNames(), twin.dimNames());
        assertTrue(twin.withKind(DeviceKind.CPU).equals(square));
    }
}
