package org.dtorch.ops.aten;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;

/**
 * The unboxed functions {@link AtenCall#call} runs for a model's most frequent operators give what the dispatcher's boxed
 * call gives, for every argument form: defaults, constants, None, optional tensors given or not; and views stay views.
 */
class DirectCallsTest {
    private record Case(String what, AtenCall call, List<Tensor> inputs) {
    }

    private static Tensor t(long... shape) {
        return TestTensors.pattern(shape, ScalarType.Float, 1, 7, -3);
    }

    private static Tensor mask(long... shape) {
        try (Tensor p = t(shape); Scalar zero = new Scalar(0.0)) {
            return p.ge(zero);
        }
    }

    @Test
    void shouldGiveWhatTheBoxedCallGivesForEveryArgumentForm() {
        Tensor x = t(2, 3, 8);
        Tensor w = t(5, 8);
        Tensor b = t(5);
        Tensor q = t(1, 4, 3, 8);
        Tensor k = t(1, 2, 5, 8);
        Tensor v = t(1, 2, 5, 8);
        Tensor m = mask(3, 5);
        Tensor norm = t(8);
        List<Case> cases = List.of(
            new Case("linear without bias", AtenCall.of("linear", "T,T", null, null), List.of(x, w)),
            new Case("linear with bias", AtenCall.of("linear", "T,T,T", null, null, null), List.of(x, w, b)),
            new Case("silu", AtenCall.of("silu", "T", (Object) null), List.of(x)),
            new Case("transpose", AtenCall.of("transpose", "T,i,i", null, 0L, 2L), List.of(x)),
            new Case("view", AtenCall.of("view", "T,[i]", null, List.of(6L, -1L)), List.of(x)),
            new Case("reshape", AtenCall.of("reshape", "T,[i]", null, List.of(3L, 16L)), List.of(x)),
            new Case("slice, defaults", AtenCall.of("slice", "T", (Object) null), List.of(x)),
            new Case("slice, start and end", AtenCall.of("slice", "T,i,i,i", null, 2L, 1L, 6L), List.of(x)),
            new Case("slice, None start, step", AtenCall.of("slice", "T,i,n,i,i", null, -1L, null, 7L, 2L), List.of(x)),
            new Case("rms_norm, no weight", AtenCall.of("rms_norm", "T,[i]", null, List.of(8L)), List.of(x)),
            new Case("rms_norm, weight and eps", AtenCall.of("rms_norm", "T,[i],T,f", null, List.of(8L), null, 1e-5), List.of(x, norm)),
            new Case("attention, causal, gqa", AtenCall.of("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null,
                true, true), List.of(q, k, v)),
            new Case("attention, mask and scale", AtenCall.of("scaled_dot_product_attention", "T,T,T,T|scale=f|enable_gqa=b", null, null,
                null, null, 0.3, true), List.of(q, k, v, m)));
        Tensor a = t(4, 8);
        Tensor right = t(8, 3);
        Tensor idx = TestTensors.pattern(new long[] {2, 3}, ScalarType.Long, 0, 5, 0);
        Tensor xt = x.transpose(1, 2);
        List<Case> more = List.of(
            new Case("mm", AtenCall.of("mm", "T,T", null, null), List.of(a, right)),
            new Case("matmul", AtenCall.of("matmul", "T,T", null, null), List.of(x, right)),
            new Case("bmm", AtenCall.of("bmm", "T,T", null, null), List.of(x, xt)),
            new Case("t", AtenCall.of("t", "T", (Object) null), List.of(a)),
            new Case("unsqueeze", AtenCall.of("unsqueeze", "T,i", null, 1L), List.of(x)),
            new Case("select", AtenCall.of("select", "T,i,i", null, 1L, -1L), List.of(x)),
            new Case("permute", AtenCall.of("permute", "T,[i]", null, List.of(2L, 0L, 1L)), List.of(x)),
            new Case("expand", AtenCall.of("expand", "T,[i]", null, List.of(3L, 4L, 8L)), List.of(a)),
            new Case("softmax", AtenCall.of("softmax", "T,i", null, -1L), List.of(x)),
            new Case("log_softmax", AtenCall.of("log_softmax", "T,i", null, 1L), List.of(x)),
            new Case("cat", AtenCall.of("cat", "[T],i", Arrays.asList(null, null), 1L), List.of(x, x)),
            new Case("embedding", AtenCall.of("embedding", "T,T", null, null), List.of(w, idx)));
        cases = new ArrayList<>(cases);
        cases.addAll(more);
        List<Tensor> all = new ArrayList<>(List.of(x, w, b, q, k, v, m, norm, a, right, idx, xt));
        try {
            for (Case c : cases) {
                assertNotNull(c.call().overload().direct(), c.what() + " has an unboxed function");
                List<Tensor> direct = c.call().call(c.inputs());
                List<Tensor> boxed = c.call().callBoxed(c.inputs());
                all.addAll(direct);
                all.addAll(boxed);
                assertEquals(1, direct.size(), c.what());
                assertEquals(Arrays.toString(TorchTensors.shape(boxed.getFirst())), Arrays.toString(TorchTensors.shape(direct.getFirst())), c.what());
                assertTrue(direct.getFirst().equal(boxed.getFirst()), c.what() + ": the same values");
                assertEquals(Arrays.toString(boxed.getFirst().strides().vec().get()), Arrays.toString(direct.getFirst().strides().vec().get()),
                    c.what() + ": the same strides");
                assertEquals(boxed.getFirst().is_alias_of(c.inputs().getFirst()), direct.getFirst().is_alias_of(c.inputs().getFirst()),
                    c.what() + ": a view where the boxed call makes one");
            }
        } finally {
            all.forEach(Tensor::close);
        }
    }

    /**
     * Grouped-query attention without a mask runs through libtorch's plain call (the query heads of a group as more
     * positions of one key/value head, or with causality the keys and values repeated per query head): libtorch's grouped
     * call's values (to rounding: another kernel sums them), for one query position and several, with and without
     * causality, and for queries that are a transposed view, as a model's are.
     */
    @Test
    void shouldAttendGroupedQueriesAsOneHeadPerGroup() {
        List<Tensor> all = new ArrayList<>();
        try {
            for (long tokens : new long[] {1, 3}) {
                Tensor q = t(1, tokens, 6, 8);
                Tensor qHeads = q.transpose(1, 2);
                Tensor k = t(1, 2, 5, 8);
                Tensor v = t(1, 2, 5, 4);
                all.addAll(List.of(q, qHeads, k, v));
                for (boolean causal : new boolean[] {false, true}) {
                    try (TensorOptional noMask = new TensorOptional(); DoubleOptional defaultScale = new DoubleOptional();
                         Tensor grouped = DirectCalls.groupedQueryAttention(qHeads, k, v, noMask, causal, defaultScale)) {
                        assertNotNull(grouped, "these shapes take the grouped way");
                    }
                }
                for (Object[] form : new Object[][] {{null, false}, {0.3, false}, {null, true}, {0.3, true}}) {
                    Object scale = form[0];
                    boolean causal = (Boolean) form[1];
                    AtenCall call = scale == null
                        ? AtenCall.of("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null, causal, true)
                        : AtenCall.of("scaled_dot_product_attention", "T,T,T|is_causal=b|scale=f|enable_gqa=b", null, null, null, causal, scale,
                            true);
                    List<Tensor> direct = call.call(List.of(qHeads, k, v));
                    List<Tensor> boxed = call.callBoxed(List.of(qHeads, k, v));
                    all.addAll(direct);
                    all.addAll(boxed);
                    String what = tokens + " query positions, scale " + scale + ", causal " + causal;
                    assertEquals("[1, 6, " + tokens + ", 4]", Arrays.toString(TorchTensors.shape(direct.getFirst())), what);
                    assertTrue(torch.allclose(direct.getFirst(), boxed.getFirst(), 1e-5, 1e-6, false), what + ": the grouped call's values");
                }
            }
        } finally {
            all.forEach(Tensor::close);
        }
    }

    /**
     * einsum unboxed: a linear layer's weight gradient ({@code "ABo,ABi->oi"}) as one matrix product, any other equation
     * through libtorch's einsum; constant_pad_nd with and without a value; index_add with rows added more than once;
     * silu_backward. The boxed call's values (the product to rounding).
     */
    @Test
    void shouldRunEinsumPaddingAndGradientsUnboxed() {
        Tensor g = t(2, 3, 5);
        Tensor x = t(2, 3, 4);
        Tensor gView = t(3, 2, 5).transpose(0, 1);
        Tensor a = t(4, 6);
        Tensor rows = torch.tensor(new long[] {3, 0, 3, 1, 0, 3});
        Tensor source = t(6, 6);
        List<Case> cases = List.of(
            new Case("weight gradient", AtenCall.of("einsum", "s,[T]", "ABo,ABi->oi", Arrays.asList(null, null)), List.of(g, x)),
            new Case("weight gradient of a view", AtenCall.of("einsum", "s,[T]", "ABo,ABi->oi", Arrays.asList(null, null)), List.of(gView, x)),
            new Case("weight gradient, one leading dimension", AtenCall.of("einsum", "s,[T]", "Ao,Ai->oi", Arrays.asList(null, null)),
                List.of(a, a)),
            new Case("another equation", AtenCall.of("einsum", "s,[T]", "abo,abi->bio", Arrays.asList(null, null)), List.of(g, x)),
            new Case("pad", AtenCall.of("constant_pad_nd", "T,[i]", null, List.of(1L, 2L)), List.of(a)),
            new Case("pad with a value", AtenCall.of("constant_pad_nd", "T,[i],f", null, List.of(0L, 1L, 2L, 0L), 0.5), List.of(a)),
            new Case("index_add", AtenCall.of("index_add", "T,i,T,T", null, 0L, null, null), List.of(a, rows, source)),
            new Case("silu_backward", AtenCall.of("silu_backward", "T,T", null, null), List.of(x, x)));
        List<Tensor> all = new ArrayList<>(List.of(g, x, gView, a, rows, source));
        try {
            assertTrue(DirectCalls.isWeightGradient("ABo,ABi->oi", g, x));
            assertFalse(DirectCalls.isWeightGradient("AAo,AAi->oi", g, x), "a repeated label is a diagonal");
            assertFalse(DirectCalls.isWeightGradient("ABo,ACi->oi", g, x));
            assertFalse(DirectCalls.isWeightGradient("Ao,Ai->oi", g, x), "one label per leading dimension");
            for (Case c : List.copyOf(cases)) {
                assertNotNull(c.call().overload().direct(), c.what() + " has an unboxed function");
                List<Tensor> direct = c.call().call(c.inputs());
                List<Tensor> boxed = c.call().callBoxed(c.inputs());
                all.addAll(direct);
                all.addAll(boxed);
                assertEquals(Arrays.toString(TorchTensors.shape(boxed.getFirst())), Arrays.toString(TorchTensors.shape(direct.getFirst())), c.what());
                assertTrue(torch.allclose(direct.getFirst(), boxed.getFirst(), 1e-5, 1e-6, false), c.what() + ": the boxed call's values");
            }
        } finally {
            all.forEach(Tensor::close);
        }
    }

    @Test
    void shouldLeaveOtherOperatorsToTheBoxedCall() {
        assertNull(AtenCall.of("amax", "T", (Object) null).overload().direct());
        assertNull(AtenCall.of("add", "T,T", null, null).overload().direct());
    }
}
