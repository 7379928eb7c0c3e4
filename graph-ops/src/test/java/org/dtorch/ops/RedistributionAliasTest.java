package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.GraphHistory;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A move that changes no device's tensor (placements that differ only on mesh dimensions of one device, or equal ones)
 * is a handle of the same device tensors under the new placements: no operator runs, the values are the source's, a write
 * through either shows in the other (one memory, as PyTorch DTensor's no-op redistribute), the tensors are freed once the
 * source and every such handle are released in any order, and the gradient flows back through the move.
 */
@Timeout(120)
class RedistributionAliasTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement P = Placement.partial();

    /** The operators issued since the last call (the history records an operator when it is issued). */
    private static List<GraphHistory.RecordedOperator> drained() {
        return dt.runtime().graph().history().drain().operators();
    }

    /** Closes this test's handles, so that no later test of the class sees the garbage collector release them. */
    private static void closeAll(DTensor... handles) {
        for (DTensor t : handles) {
            t.close();
        }
    }

    @Test
    void shouldMoveWithoutAnOperatorOnDimensionsOfOneDevice() {
        DeviceMesh one = dt.mesh(2);
        DeviceMesh grid = dt.initDeviceMesh(new int[] {1, 4});
        try (Tensor x = TestTensors.pattern(new long[] {4, 6}, ScalarType.Float, 1, 7, -3)) {
            DTensor a = dt.tensor(x, one, S1);
            DTensor g = dt.tensor(x, grid, S1, S0);
            drained();
            DTensor[] moved = {a.redistribute(R), a.redistribute(S1), a.redistribute(P).redistribute(S0), g.redistribute(R, S0),
                g.redistribute(P, S0)};
            assertEquals(List.of(), drained(), "moves that change no device's tensor run no operator");
            assertEquals(List.of(R), moved[0].placements());
            assertEquals(List.of(R, S0), moved[3].placements());
            for (DTensor m : moved) {
                try (Tensor got = m.toTorch()) {
                    assertTrue(torch.equal(got, x), m + " holds the source's values");
                }
            }
            drained();
            DTensor across = g.redistribute(R, S1);
            assertEquals(1, drained().size(), "a move on a dimension of several devices runs");
            try (Tensor got = across.toTorch()) {
                assertTrue(torch.equal(got, x));
            }
            closeAll(a, g, across);
            closeAll(moved);
        }
    }

    @Test
    void shouldShareMemory() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {1, 4});
        try (Tensor x = TestTensors.pattern(new long[] {8, 3}, ScalarType.Float, 1, 5, -2); Tensor plusOne = x.add(new Scalar(1.0));
             Tensor plusThree = x.add(new Scalar(3.0))) {
            DTensor source = dt.tensor(x, grid, S1, S0);
            DTensor alias = source.redistribute(R, S0);
            DTensor second = alias.redistribute(S0, S0);
            alias.add_(1.0);
            try (Tensor got = source.toTorch()) {
                assertTrue(torch.equal(got, plusOne), "a write through the moved handle shows in its source");
            }
            source.add_(2.0);
            try (Tensor got = second.toTorch()) {
                assertTrue(torch.equal(got, plusThree), "and the other way round, through a move of a move");
            }
            source.close();
            alias.close();
            try (DTensor read = second.mul(1.0); Tensor got = read.toTorch()) {
                assertTrue(torch.equal(got, plusThree), "the last handle keeps the tensors alive");
            }
            second.close();
        }
    }

    /**
     * The devices' tensors counted in a runtime of the test's own (threads), where no other handle is alive and none is
     * left for the garbage collector to release meanwhile: one tensor per device for three handles, none after the last.
     */
    @Test
    void shouldFreeOnceEveryHandleIsReleasedInAnyOrder() {
        try (DTorch own = DTorch.init(DTorchOptions.builder().devices(4).build());
             Tensor x = TestTensors.pattern(new long[] {8, 3}, ScalarType.Float, 1, 5, -2)) {
            DeviceMesh grid = own.initDeviceMesh(new int[] {1, 4});
            for (int order = 0; order < 3; order++) {
                DTensor source = own.tensor(x, grid, S1, S0);
                DTensor[] handles = {source, source.redistribute(R, S0), source.redistribute(P, S0)};
                own.sync();
                assertEquals(4, own.runtime().liveBlobCount(), "three handles, one tensor per device");
                for (int k = 0; k < 3; k++) {
                    handles[(order + k) % 3].close();
                    own.sync();
                    assertEquals(k < 2 ? 4 : 0, own.runtime().liveBlobCount(), "after " + (k + 1) + " handles released");
                }
            }
        }
    }

    @Test
    void shouldPassTheGradientBackThroughTheMove() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {1, 4});
        try (Tensor x = torch.randn(8, 3); Tensor w = torch.randn(8, 3)) {
            DTensor dx = dt.tensor(x, grid, S1, S0).requiresGrad_(true);
            DTensor moved = dx.redistribute(R, S0);
            DTensor dw = dt.tensor(w, grid, R, S0);
            moved.mul(dw).sum().backward();
            try (Tensor got = dx.grad().toTorch()) {
                assertTrue(torch.allclose(got, w, 1e-5, 1e-6, false), "d sum(x * w) / dx = w");
            }
            assertEquals(List.of(S1, S0), dx.grad().placements(), "the gradient has the leaf's placements");
            closeAll(dx.grad(), dx, moved, dw);
        }
    }
}
