package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.GradTape;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.GraphHistory;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A recorded attention call keeps libtorch's graph on its devices ({@link AttentionGraphSpec}) and its backward runs
 * that graph ({@link AttentionBackwardSpec}): the backward issues one operator and no attention forward, the gradients
 * equal libtorch's autograd on the whole tensors (heads sharded, grouped-query and causal, a mask), a graph kept with
 * {@code retain_graph} serves a second pass, which frees it (a third fails, naming {@code retain_graph}), a call
 * under {@code no_grad} runs the plain operator, and the devices' tensors (the graph's leaves included) are freed with
 * the last handle.
 */
@Timeout(120)
class AttentionGraphTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    private static List<String> issued() {
        return dt.runtime().graph().history().drain().operators().stream().map(GraphHistory.RecordedOperator::name).toList();
    }

    private record Case(String what, AtenCall call, long[][] shapes, Placement placement) {
    }

    private static final List<Case> CASES = List.of(
        new Case("causal grouped-query, heads S(1)", call("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null,
            true, true), new long[][] {{2, 8, 5, 8}, {2, 4, 5, 8}, {2, 4, 5, 8}}, Placement.shard(1)),
        new Case("additive mask, scale, batch S(0) (one empty shard)", call("scaled_dot_product_attention", "T,T,T,T|scale=f", null, null,
            null, null, 0.5), new long[][] {{3, 2, 5, 8}, {3, 2, 6, 8}, {3, 2, 6, 4}, {5, 6}}, Placement.shard(0)),
        new Case("replicated", call("scaled_dot_product_attention", "T,T,T", null, null, null),
            new long[][] {{2, 3, 4, 8}, {2, 3, 4, 8}, {2, 3, 4, 8}}, R));

    @Test
    void shouldDifferentiateFromTheForwardsGraphWithoutRunningItAgain() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        for (Case c : CASES) {
            torch.manual_seed(7);
            List<Tensor> locals = new ArrayList<>();
            List<DTensor> inputs = new ArrayList<>();
            for (int i = 0; i < c.shapes().length; i++) {
                Tensor t = torch.randn(c.shapes()[i]);
                locals.add(i < 3 ? t.detach().requires_grad_(true) : t);
                DTensor d = dt.tensor(t, mesh, i < 3 ? c.placement() : R);
                inputs.add(i < 3 ? d.requiresGrad_(true) : d);
            }
            issued();
            DTensor out = dt.aten(c.call(), inputs.toArray(DTensor[]::new)).getFirst();
            assertEquals(List.of("scaled_dot_product_attention"), issued(), c.what() + ": the forward is one operator");
            Tensor w = torch.randn(out.shape());
            DTensor loss = out.mul(dt.tensor(w, mesh, R)).sum();
            issued();
            dt.autograd().backward(List.of(loss), List.of(), true, List.of());
            List<String> backward = issued();
            assertEquals(1, backward.stream().filter("scaled_dot_product_attention_backward"::equals).count(), c.what() + ": " + backward);
            assertTrue(backward.stream().noneMatch("scaled_dot_product_attention"::equals), c.what() + ": no forward again " + backward);
            Tensor wantOut = c.call().call(locals).getFirst();
            try (TensorVector roots = new TensorVector(wantOut.mul(w).sum()); TensorVector none = new TensorVector();
                 TensorVector all = new TensorVector(); BoolOptional retain = new BoolOptional()) {
                torch.backward(roots, none, retain, false, all);
            }
            for (int i = 0; i < 3; i++) {
                try (Tensor got = inputs.get(i).grad().toTorch()) {
                    assertTrue(torch.allclose(got, locals.get(i).grad(), 1e-4, 1e-5, false), c.what() + ": input " + i + "'s gradient");
                }
            }
            loss.backward(); // the graph was retained: a second pass accumulates the same gradients again, and frees it
            for (int i = 0; i < 3; i++) {
                try (Tensor got = inputs.get(i).grad().toTorch(); Tensor twice = locals.get(i).grad().mul(new Scalar(2.0))) {
                    assertTrue(torch.allclose(got, twice, 1e-4, 1e-5, false), c.what() + ": input " + i + "'s gradient after two passes");
                }
            }
            RuntimeException third = assertThrows(RuntimeException.class, loss::backward, c.what() + ": a third pass");
            assertTrue(third.getMessage().contains("retain_graph"), third.getMessage());
            loss.close();
            out.close();
            inputs.forEach(DTensor::close);
        }
    }

    @Test
    void shouldRunThePlainOperatorWithoutGradMode() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        AtenCall sdpa = call("scaled_dot_product_attention", "T,T,T", null, null, null);
        DTensor q = dt.tensor(torch.randn(2, 4, 3, 8), mesh, Placement.shard(1)).requiresGrad_(true);
        issued();
        try (GradTape.Scope off = dt.autograd().noGrad()) {
            DTensor out = dt.aten(sdpa, q, q, q).getFirst();
            dt.sync();
            assertEquals(1, dt.runtime().graph().history().drain().operators().getFirst().outputs().size(), "the plain call, one output");
            out.close();
        }
        q.close();
    }

    /** In a runtime of the test's own, where no other handle is alive: nothing is left on the devices after the last handle. */
    @Test
    void shouldFreeTheGraphWithItsTensors() {
        try (DTorch own = DTorch.init(DTorchOptions.builder().devices(2).build())) {
            DeviceMesh mesh = own.initDeviceMesh(new int[] {2});
            AtenCall sdpa = call("scaled_dot_product_attention", "T,T,T|is_causal=b", null, null, null, true);
            for (int round = 0; round < 2; round++) {
                DTensor q = own.tensor(torch.randn(2, 4, 3, 8), mesh, Placement.shard(1)).requiresGrad_(true);
                DTensor k = own.tensor(torch.randn(2, 4, 3, 8), mesh, Placement.shard(1)).requiresGrad_(true);
                DTensor out = own.aten(sdpa, q, k, k).getFirst();
                DTensor loss = out.sum();
                loss.backward();
                own.sync();
                assertTrue(own.runtime().liveBlobCount() > 0);
                for (DTensor t : List.of(q.grad(), k.grad(), loss, out, q, k)) {
                    t.close();
                }
                System.gc(); // the tape's saved handles (the graph's leaves among them) go with the garbage collector
                long deadline = System.nanoTime() + 20_000_000_000L;
                while (own.runtime().liveBlobCount() != 0 && System.nanoTime() < deadline) {
                    System.gc();
                    own.sync();
                    Thread.onSpinWait();
                }
                assertEquals(0, own.runtime().liveBlobCount(), "round " + round + ": every device tensor freed");
            }
        }
    }
}
