package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Bad requests fail before any communication, with a message listing both placement sequences; nothing breaks. */
@Timeout(60)
class BadRequestTest {
    private static final DeviceMesh LINE = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);

    private static String rejected(Runnable call) {
        return assertThrows(IllegalArgumentException.class, call::run).getMessage();
    }

    @Test
    void shouldRejectBadRequestsClearlyAndStayUsable() {
        long[] shape = {8, 3};
        String outOfRange = rejected(() -> ConvertKernel.of(Sharding.of(LINE, Placement.shard(2)), Sharding.of(LINE, Placement.replicate()), shape));
        assertTrue(outOfRange.contains("from [S(2)]") && outOfRange.contains("to [R]"), outOfRange);
        assertTrue(outOfRange.contains("S(2) on mesh dimension 0 is out of range for a tensor of shape [8, 3]"), outOfRange);

        // A dimension shorter than the devices that split it is a layout like any other: the last devices' shards are empty.
        assertTrue(ConvertKernel.of(Sharding.of(LINE, Placement.shard(0)), Sharding.of(LINE, Placement.shard(1)), shape).plan() != null);
        String negative = rejected(() -> ConvertKernel.of(Sharding.of(LINE, Placement.shard(0)), Sharding.of(LINE, Placement.replicate()),
            new long[] {-2, 3}));
        assertTrue(negative.contains("shape [-2, 3] has a negative dimension"), negative);

        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of());

        DeviceMesh gpus = DeviceMesh.of(DeviceKind.CUDA, 0, 1, 2, 3);
        // Between kinds is not a bad request: it plans through the CUDA twin; the runtime, not the
        // planner, refuses a CUDA mesh in a CPU runtime (HostMeshValidationTest).
        assertTrue(ConvertKernel.of(Sharding.of(LINE, Placement.shard(0)), Sharding.of(gpus, Placement.shard(0)), shape).plan()
            .throughDevice().isPresent());

        String average = rejected(() -> ConvertKernel.of(Sharding.of(LINE, Placement.replicate()),
            Sharding.of(LINE, Placement.partial(ReduceOpType.AVG)), shape));
        assertTrue(average.contains("P(avg)") && average.contains("from [R]"), average);

        String placements = rejected(() -> Sharding.of(square, Placement.replicate()));
        assertTrue(placements.contains("need one entry per dimension"), placements);

        try (ThreadGroupManager groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(20));
             Tensor wrong = TestTensors.pattern(new long[] {3, 3}, ScalarType.Float, 0, 7, 0)) {
            ConvertKernel convert = ConvertKernel.of(Sharding.of(LINE, Placement.shard(0)), Sharding.of(LINE, Placement.replicate()), shape);
            String badInput = rejected(() -> convert.run(MeshRun.context(groups, 0, MeshRun.newOperation()), wrong));
            assertTrue(badInput.contains("the input is float32[3, 3] on cpu but the device's shard of [8, 3] is [2, 3]"), badInput);
            String stranger = rejected(() -> convert.run(MeshRun.context(groups, 7, MeshRun.newOperation()), null));
            assertTrue(stranger.contains("the device is in neither"), stranger);
            // The runtime is still usable: a correct redistribution on the same manager works.
            try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
                assertNull(RedistributionMatrixTest.check(groups, reference, shape, Sharding.of(LINE, Placement.shard(0)),
                    Sharding.of(LINE, Placement.replicate())));
            }
        }
    }
}
