package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Multi-tensor in-place operators on distributed tensors ({@link LocalForeachSpec}): each device runs one call over its own
 * shards of every tensor, with no collective, and the result equals the same call on the whole tensors; partial sums and
 * tensors of two meshes are refused before anything runs.
 */
@Timeout(120)
class LocalForeachTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    @Test
    void shouldRunAFusedAdamStepOnEveryDevicesShardsWithoutCommunication() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        Placement[][] layouts = {{Placement.shard(0), Placement.shard(1)}, {R, Placement.shard(0)}, {R, R}};
        long[][] shapes = {{7, 5}, {3}, {2, 2}};
        List<Tensor> params = new ArrayList<>();
        List<Tensor> grads = new ArrayList<>();
        List<DTensor> dparams = new ArrayList<>();
        List<DTensor> dgrads = new ArrayList<>();
        List<DTensor> dm = new ArrayList<>();
        List<DTensor> dv = new ArrayList<>();
        List<DTensor> dsteps = new ArrayList<>();
        List<Tensor> m = new ArrayList<>();
        List<Tensor> v = new ArrayList<>();
        List<Tensor> steps = new ArrayList<>();
        for (int i = 0; i < shapes.length; i++) {
            params.add(torch.randn(shapes[i]));
            grads.add(torch.randn(shapes[i]));
            m.add(torch.zeros(shapes[i]));
            v.add(torch.zeros(shapes[i]));
            steps.add(torch.ones(new long[0]));
            dparams.add(dt.tensor(params.get(i), grid, layouts[i]));
            dgrads.add(dt.tensor(grads.get(i), grid, layouts[i]));
            dm.add(dt.tensor(m.get(i), grid, layouts[i]));
            dv.add(dt.tensor(v.get(i), grid, layouts[i]));
            dsteps.add(dt.tensor(steps.get(i), grid, R, R));
        }
        List<Object> three = Collections.nCopies(shapes.length, null); // one placeholder per tensor of a list
        AtenCall adamw = call("_fused_adamw_", "[T],[T],[T],[T],[e],[T]|lr=f|beta1=f|beta2=f|weight_decay=f|eps=f|amsgrad=b|maximize=b",
            three, three, three, three, List.of(), three, 0.01, 0.9, 0.999, 0.01, 1e-8, false, false);
        List<DTensor> inputs = new ArrayList<>();
        List<Tensor> locals = new ArrayList<>();
        for (List<DTensor> column : List.of(dparams, dgrads, dm, dv, dsteps)) {
            inputs.addAll(column);
        }
        for (List<Tensor> column : List.of(params, grads, m, v, steps)) {
            locals.addAll(column);
        }
        dt.sync();
        Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
        dt.aten(adamw, inputs.toArray(DTensor[]::new));
        dt.sync();
        assertEquals(before, dt.runtime().groups().collectiveCounter().snapshot(), "no collective");
        adamw.call(locals);
        for (int i = 0; i < shapes.length; i++) {
            try (Tensor got = dparams.get(i).toTorch()) {
                assertTrue(torch.allclose(got, params.get(i), 1e-5, 1e-6, false), "parameter " + i);
            }
            assertEquals(List.of(layouts[i]), dparams.get(i).placements());
        }
    }

    @Test
    void shouldRefusePartialSumsAndTwoMeshesBeforeRunning() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DeviceMesh two = dt.mesh(0, 1);
        try (Tensor x = torch.randn(4, 3)) {
            DTensor a = dt.tensor(x, line, Placement.shard(0));
            DTensor partial = dt.tensor(x, line, R).redistribute(Placement.partial());
            DTensor other = dt.tensor(x, two, R);
            AtenCall mul2 = call("_foreach_mul_", "[T],f", Collections.nCopies(2, null), 2.0);
            assertThrows(IllegalArgumentException.class, () -> dt.aten(mul2, a, partial));
            assertThrows(IllegalArgumentException.class, () -> dt.aten(mul2, a, other));
            dt.aten(call("_foreach_mul_", "[T],f", Collections.nCopies(1, null), 2.0), a);
            try (Tensor got = a.toTorch(); Tensor twice = x.mul(new org.bytedeco.pytorch.Scalar(2.0))) {
                assertTrue(torch.allclose(got, twice, 1e-6, 1e-7, false), "still usable, and the call ran once");
            }
        }
    }
}
