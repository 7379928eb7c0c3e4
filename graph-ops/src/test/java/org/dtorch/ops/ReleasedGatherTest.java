package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.GradTape;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link GradTape#releaseUntilBackward}: the all-gathered copy of a sharded weight is released after the forward, and
 * the backward gathers it again for the derivative that reads it, giving the gradient that keeping it gives, placed
 * like the sharded weight.
 */
@Timeout(120)
class ReleasedGatherTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final AtenCall LINEAR = call("linear", "T,T", null, null);

    /** {@code sum(linear(linear(x, w1), w2) * c)} with both weights gathered from Shard(0); the gathers released or kept. */
    private static List<DTensor> run(Tensor x, Tensor w1, Tensor w2, Tensor c, boolean release) {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DTensor dw1 = dt.tensor(w1, line, S0).requiresGrad_(true);
        DTensor dw2 = dt.tensor(w2, line, S0).requiresGrad_(true);
        DTensor dx = dt.tensor(x, line, S0);
        DTensor full1 = dw1.redistribute(R);
        DTensor h = dt.aten(LINEAR, dx, full1).getFirst();
        DTensor full2 = dw2.redistribute(R);
        DTensor y = dt.aten(LINEAR, h, full2).getFirst();
        if (release) {
            long before = SettledMemory.liveBytes(dt, 0);
            dt.autograd().releaseUntilBackward(full1);
            dt.autograd().releaseUntilBackward(full2);
            assertTrue(full1.isClosed() && full2.isClosed());
            assertEquals(before - 4 * (w1.numel() + w2.numel()), dt.memoryStats(0).blobLiveBytes(),
                "device 0 no longer holds the two gathered weights");
        }
        y.mul(dt.tensor(c, line, S0)).sum().backward();
        return List.of(dw1, dw2);
    }

    @Test
    void shouldGatherAReleasedWeightAgainForTheBackward() {
        try (Tensor x = torch.randn(6, 5); Tensor w1 = torch.randn(7, 5); Tensor w2 = torch.randn(3, 7); Tensor c = torch.randn(6, 3)) {
            List<DTensor> kept = run(x, w1, w2, c, false);
            List<DTensor> released = run(x, w1, w2, c, true);
            for (int i = 0; i < 2; i++) {
                assertEquals(List.of(S0), released.get(i).grad().placements(), "the gradient is reduce-scattered like its weight");
                try (Tensor want = kept.get(i).grad().toTorch(); Tensor got = released.get(i).grad().toTorch()) {
                    assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false), "weight " + (i + 1));
                }
            }
            // dw1 = (c w2)^T x: the first linear's derivative gets its gradient through the second one's, which read the
            // released w2 gathered again.
            try (Tensor cw2 = c.mm(w2); Tensor want = cw2.t().mm(x); Tensor got = released.get(0).grad().toTorch()) {
                assertTrue(torch.allclose(got, want, 1e-4, 1e-5, false));
            }
        }
    }

    @Test
    void shouldRefuseToReleaseWhatNoRedistributionMade() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor w = torch.randn(4, 3)) {
            DTensor dw = dt.tensor(w, line, S0).requiresGrad_(true);
            DTensor doubled = dw.mul(2.0);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> dt.autograd().releaseUntilBackward(doubled));
            assertTrue(e.getMessage().contains("not out of a redistribution"), e.getMessage());
            assertFalse(doubled.isClosed(), "a refused release leaves the tensor usable");
            try (GradTape.Scope off = dt.autograd().noGrad()) {
                DTensor gathered = dw.redistribute(R);
                dt.autograd().releaseUntilBackward(gathered);
                assertTrue(gathered.isClosed(), "a gather no operator recorded is released at once");
            }
        }
    }
}
