package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;

/**
 * The plan of {@code _fused_rms_norm_backward} (RMS norm's one-kernel derivative on CUDA) on sharded inputs: the
 * placements its strategy keeps and the outputs' shapes, dtypes and placements, which libtorch cannot infer (no meta
 * kernel). Planning runs in the client without a kernel, so it is checked here on a CUDA mesh without a GPU; the values
 * are checked on a GPU by {@code cuda/test_dtensor_autograd_cuda.py}.
 */
class RmsNormBackwardStrategyTest {
    private static final DeviceMesh MESH = DeviceMesh.of(DeviceKind.CUDA, 0, 1);
    private static final Placement R = Placement.replicate();
    private static final Placement P = Placement.partial();
    private static final long[] X = {3, 5, 8};
    private static final long[] RSTD = {3, 5, 1};
    private static final long[] W = {8};

    private static AtenCall backward(boolean... mask) {
        return AtenCall.of("_fused_rms_norm_backward", "T,T,[i],T,T,[b]", new Object[] {null, null, List.of(8L), null, null,
            List.of(mask[0], mask[1])});
    }

    private static TensorMeta meta(long[] shape, ScalarType dtype, Placement p) {
        return new TensorMeta(shape, dtype, Rules.sharding(MESH, List.of(p)));
    }

    private static List<TensorMeta> inputs(Placement grad, Placement x, Placement rstd, ScalarType weight) {
        List<TensorMeta> in = new ArrayList<>();
        in.add(meta(X, ScalarType.Float, grad));
        in.add(meta(X, ScalarType.Float, x));
        in.add(meta(RSTD, ScalarType.Float, rstd));
        in.add(meta(W, weight, R));
        return in;
    }

    private static void assertPlan(Placement grad, Placement x, Placement kept, Placement weightGrad) {
        AtenSpec spec = new AtenSpec(backward(true, true));
        ShardingStrategy.Decision d = spec.decide(inputs(grad, x, R, ScalarType.Float));
        assertEquals(List.of(List.of(kept), List.of(kept), List.of(kept), List.of(R)), d.inputs(), grad + ", " + x);
        List<TensorMeta> out = spec.inferOutputs(inputs(kept, kept, kept, ScalarType.Float));
        assertEquals(2, out.size());
        assertArrayEquals(X, out.get(0).shape());
        assertArrayEquals(W, out.get(1).shape());
        assertEquals(ScalarType.Float, out.get(0).dtype());
        assertEquals(ScalarType.Float, out.get(1).dtype());
        assertEquals(List.of(kept), out.get(0).placements());
        assertEquals(List.of(weightGrad), out.get(1).placements());
    }

    @Test
    void shouldKeepRowShardsAndSumTheWeightsGradient() {
        assertPlan(Placement.shard(0), Placement.shard(0), Placement.shard(0), P);
        assertPlan(Placement.shard(1), R, Placement.shard(1), P); // the gradient's row shard, the input sliced to it
        assertPlan(R, Placement.shard(2), R, R); // a normalized dimension: gathered
        assertPlan(R, R, R, R);
    }

    @Test
    void shouldRefuseWhatItCannotPlanBeforeAnyKernelRuns() {
        AtenSpec spec = new AtenSpec(backward(true, true));
        Exception dtype = assertThrows(UnsupportedOperationException.class,
            () -> spec.inferOutputs(inputs(R, R, R, ScalarType.Half)));
        assertTrue(dtype.getMessage().contains("weight of the input's dtype"), dtype.getMessage());
        AtenSpec one = new AtenSpec(backward(true, false));
        Exception mask = assertThrows(UnsupportedOperationException.class, () -> one.decide(inputs(R, R, R, ScalarType.Float)));
        assertTrue(mask.getMessage().contains("output_mask"), mask.getMessage());
        List<TensorMeta> mismatched = inputs(R, R, R, ScalarType.Float);
        mismatched.set(0, meta(new long[] {3, 5, 4}, ScalarType.Float, R));
        Exception shape = assertThrows(IllegalArgumentException.class, () -> spec.decide(mismatched));
        assertTrue(shape.getMessage().contains("differ in shape"), shape.getMessage());
    }
}
