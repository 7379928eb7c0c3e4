package org.dtorch.core.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;

class RedistributionPlannerTest {
    private static final DeviceMesh LINE = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh MESH = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 3}, List.of());

    private static List<StepKind> kinds(RedistributionPlan plan) {
        return plan.allSteps().stream().map(RedistributionStep::kind).toList();
    }

    private static RedistributionPlan plan(DeviceMesh mesh, List<Placement> from, List<Placement> to, long... shape) {
        return RedistributionPlanner.plan(new Sharding(mesh, from), new Sharding(mesh, to), shape);
    }

    @Test
    void shouldUseTheSeedsCollectivePerStep() {
        assertEquals(List.of(StepKind.ALL_GATHER), kinds(plan(LINE, List.of(Placement.shard(0)), List.of(Placement.replicate()), 8, 8)));
        assertEquals(List.of(StepKind.ALL_TO_ALL), kinds(plan(LINE, List.of(Placement.shard(0)), List.of(Placement.shard(1)), 8, 8)));
        assertEquals(List.of(StepKind.LOCAL_SLICE), kinds(plan(LINE, List.of(Placement.replicate()), List.of(Placement.shard(1)), 8, 8)));
        assertEquals(List.of(StepKind.REDUCE_SCATTER), kinds(plan(LINE, List.of(Placement.partial()), List.of(Placement.shard(0)), 8, 8)));
        assertEquals(List.of(StepKind.ALL_REDUCE), kinds(plan(LINE, List.of(Placement.partial()), List.of(Placement.replicate()), 8, 8)));
        assertEquals(List.of(StepKind.REPLICATE_TO_PARTIAL), kinds(plan(LINE, List.of(Placement.replicate()), List.of(Placement.partial()), 8, 8)));
        assertEquals(List.of(StepKind.SHARD_TO_PARTIAL), kinds(plan(LINE, List.of(Placement.shard(1)), List.of(Placement.partial()), 8, 8)));
        assertTrue(plan(LINE, List.of(Placement.shard(1)), List.of(Placement.shard(1)), 8, 8).isIdentity());
    }

    @Test
    void shouldMoveNothingOnMeshDimensionsOfOneDevice() {
        DeviceMesh oneByThree = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {1, 3}, List.of());
        DeviceMesh single = DeviceMesh.of(DeviceKind.CPU, 2);
        assertTrue(plan(single, List.of(Placement.shard(0)), List.of(Placement.replicate()), 5, 3).isIdentity());
        assertTrue(plan(single, List.of(Placement.partial()), List.of(Placement.shard(1)), 5, 3).isIdentity());
        assertTrue(plan(single, List.of(Placement.replicate()), List.of(Placement.partial(ReduceOpType.AVG)), 5, 3).isIdentity());
        assertTrue(plan(oneByThree, List.of(Placement.shard(0), Placement.shard(0)), List.of(Placement.replicate(), Placement.shard(0)), 6, 3)
            .isIdentity());
        RedistributionPlan other = plan(oneByThree, List.of(Placement.shard(1), Placement.shard(0)),
            List.of(Placement.replicate(), Placement.replicate()), 6, 3);
        assertEquals(List.of(StepKind.ALL_GATHER), kinds(other), "only the dimension of three devices moves anything");
        assertEquals(1, other.allSteps().getFirst().meshDim());
    }

    @Test
    void shouldNeverRouteShardToShardThroughReplicate() {
        RedistributionPlan plan = plan(MESH, List.of(Placement.replicate(), Placement.shard(0)), List.of(Placement.replicate(), Placement.shard(1)), 12, 12);
        assertEquals(List.of(StepKind.ALL_TO_ALL), kinds(plan));
        assertEquals(1, plan.allSteps().getFirst().meshDim());
    }

    @Test
    void shouldUndoInnerShardsBeforeOuterOnes() {
        // S(0) nested over both mesh dims; gathering the outer one first would concatenate the wrong rows.
        RedistributionPlan plan = plan(MESH, List.of(Placement.shard(0), Placement.shard(0)), List.of(Placement.replicate(), Placement.replicate()), 12, 12);
        assertEquals(2, plan.allSteps().size(), plan.toString());
        assertEquals(1, plan.allSteps().get(0).meshDim(), plan.toString());
        assertEquals(0, plan.allSteps().get(1).meshDim(), plan.toString());
        // Adding an outer S(0) above an existing inner S(0) must first move the inner one away.
        RedistributionPlan add = plan(MESH, List.of(Placement.replicate(), Placement.shard(0)), List.of(Placement.shard(0), Placement.shard(0)), 12, 12);
        assertRespectsNesting(List.of(Placement.replicate(), Placement.shard(0)), add);
        assertRespectsNesting(List.of(Placement.shard(0), Placement.shard(1)),
            plan(MESH, List.of(Placement.shard(0), Placement.shard(1)), List.of(Placement.shard(1), Placement.shard(0)), 12, 12));
    }

    /** Every step that removes or adds S(d) on mesh dimension i does so where no inner mesh dimension shards d. */
    private static void assertRespectsNesting(List<Placement> start, RedistributionPlan plan) {
        List<Placement> state = new java.util.ArrayList<>(start);
        for (RedistributionStep step : plan.allSteps()) {
            for (Placement changed : List.of(step.from(), step.to())) {
                if (changed instanceof Shard s) {
                    for (int j = step.meshDim() + 1; j < state.size(); j++) {
                        assertTrue(!state.get(j).isShard(s.dim()), "step " + step + " on " + state + " breaks nesting in " + plan);
                    }
                }
            }
            state.set(step.meshDim(), step.to());
        }
        assertEquals(plan.target().placements(), state);
    }

    @Test
    void shouldCachePlansByTheirInputs() {
        RedistributionPlan first = plan(LINE, List.of(Placement.shard(0)), List.of(Placement.replicate()), 16, 4);
        RedistributionPlan second = plan(LINE, List.of(Placement.shard(0)), List.of(Placement.replicate()), 16, 4);
        assertSame(first, second);
    }

    @Test
    void shouldPlanMovesBetweenMeshesThroughATransfer() {
        DeviceMesh two = DeviceMesh.of(DeviceKind.CPU, 4, 5);
        RedistributionPlan plan = RedistributionPlanner.plan(Sharding.of(LINE, Placement.partial()), Sharding.of(two, Placement.partial()),
            new long[] {8, 6});
        assertEquals(List.of(StepKind.ALL_REDUCE), plan.sourceSteps().stream().map(RedistributionStep::kind).toList());
        assertEquals(List.of(StepKind.REPLICATE_TO_PARTIAL), plan.targetSteps().stream().map(RedistributionStep::kind).toList());
        CrossMeshTransfer transfer = plan.transfer().orElseThrow();
        assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L), transfer.participants());
        assertEquals(2, transfer.pieces().size());
        // The replicas are spread: device 4 reads from replica 0, device 5 from replica 1.
        assertEquals(List.of(0L, 1L), transfer.pieces().stream().map(CrossMeshTransfer.Piece::sourceDevice).toList());
    }
}
