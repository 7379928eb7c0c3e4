package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.GradTape;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gradient hooks, retained gradients and recorded backward passes of the tape, against gradients written out on the
 * whole torch tensors: a hook sees the complete gradient (a leaf's on its placements) and its result replaces it; a
 * tensor that retains its gradient keeps it; a pass with {@code createGraph} gives gradients that differentiate again.
 */
@Timeout(120)
class GradHooksTest extends FourDeviceRuntime {
    private static final Placement S0 = Placement.shard(0);

    private static Tensor randn(long... shape) {
        torch.manual_seed(7);
        return torch.randn(shape);
    }

    private static void assertClose(Tensor want, DTensor got, String what) {
        Tensor value = got.toTorch();
        assertTrue(torch.allclose(value, want, 1e-4, 1e-5, false), what + ": " + value.sub(want).abs().max().item_float());
    }

    @Test
    void shouldCallHooksWithCompleteGradientsAndUseTheirResults() {
        Tensor x = randn(8, 3);
        DTensor dx = dt.tensor(x, dt.defaultMesh(), S0).requiresGrad_(true);
        GradTape tape = dt.autograd();
        List<DTensor> leafSeen = new ArrayList<>();
        tape.registerHook(dx, g -> {
            leafSeen.add(g);
            return null;
        });
        DTensor h = dx.mul(dx);
        List<DTensor> seen = new ArrayList<>();
        tape.registerHook(h, g -> {
            seen.add(g);
            return g.mul(2.0);
        });
        h.mul(3.0).sum().backward();
        assertEquals(1, seen.size());
        assertClose(torch.full(new long[] {8, 3}, new Scalar(3.0)), seen.getFirst(), "the intermediate gradient");
        assertEquals(List.of(S0), leafSeen.getFirst().placements(), "a leaf's hook sees its placements");
        assertClose(x.mul(new Scalar(12.0)), dx.grad(), "d(3 * x^2)/dx with the intermediate gradient doubled");
        assertClose(x.mul(new Scalar(12.0)), leafSeen.getFirst(), "the gradient the leaf's hook kept");
    }

    @Test
    void shouldRemoveHooksAndRefuseThemOnTensorsWithoutGrad() {
        DTensor d = dt.tensor(randn(4), dt.defaultMesh(), S0).requiresGrad_(true);
        GradTape tape = dt.autograd();
        GradTape.HookHandle handle = tape.registerHook(d, g -> g.mul(5.0));
        handle.remove();
        handle.remove();
        d.sum().backward();
        assertClose(torch.ones(4), d.grad(), "no hook after remove()");
        DTensor plain = dt.ones(new long[] {4}, dt.defaultMesh(), S0);
        assertThrows(IllegalStateException.class, () -> tape.registerHook(plain, g -> g));
        assertThrows(IllegalStateException.class, () -> tape.retainGrad(plain));
    }

    @Test
    void shouldRetainTheGradientOfAnIntermediateTensor() {
        Tensor x = randn(6, 2);
        DTensor dx = dt.tensor(x, dt.defaultMesh(), S0).requiresGrad_(true);
        DTensor h = dx.mul(2.0);
        dt.autograd().retainGrad(h);
        DTensor unretained = dx.mul(1.0);
        h.mul(h).sum().backward();
        assertClose(x.mul(new Scalar(4.0)), h.grad(), "2h, h = 2x");
        assertNull(unretained.grad());
    }

    @Test
    void shouldDifferentiateARecordedBackwardPassAgain() {
        Tensor x = randn(5, 4);
        DTensor dx = dt.tensor(x, dt.defaultMesh(), S0).requiresGrad_(true);
        GradTape tape = dt.autograd();
        DTensor cube = dx.mul(dx).mul(dx).sum();
        DTensor g = tape.grad(List.of(cube), List.of(dx), List.of(), true, true, false).getFirst();
        assertNotNull(g.gradFn(), "the gradient has a graph of its own");
        assertClose(x.mul(x).mul(new Scalar(3.0)), g, "3 x^2");
        DTensor g2 = tape.grad(List.of(g.sum()), List.of(dx), List.of(), false, false, false).getFirst();
        assertClose(x.mul(new Scalar(6.0)), g2, "6 x");
        assertNull(g2.gradFn(), "without createGraph nothing is recorded");
    }
}
