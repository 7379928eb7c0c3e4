package org.dtorch.ops;

import static org.dtorch.ops.AutogradOpsTest.aten;
import static org.dtorch.ops.AutogradOpsTest.check;
import static org.dtorch.ops.AutogradOpsTest.f;
import static org.dtorch.ops.AutogradOpsTest.idx;
import static org.dtorch.ops.AutogradOpsTest.one;
import static org.dtorch.ops.AutogradOpsTest.pos;
import static org.dtorch.ops.AutogradOpsTest.ties;
import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.AutogradOpsTest.Case;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gradients of the operators models use beyond the transformer block's, against libtorch's autograd on the whole
 * tensors, on random placements (partial inputs, uneven and empty shards) of a 1-D mesh of four devices and a 2 x 2
 * mesh: reductions to the largest or smallest values (ties split as torch splits them), the products with an added
 * term, {@code einsum}, convolutions, pooling, {@code group_norm}, {@code batch_norm}, {@code index_select},
 * {@code cumsum}, {@code prod}, the element-wise operators of activations and clamps, and the backward operators of the
 * activations (for second derivatives). The harness is {@link AutogradOpsTest}'s.
 */
@Timeout(300)
class AutogradModelOperatorsTest extends FourDeviceRuntime {

    static List<Case> cases() {
        List<Case> cs = new ArrayList<>();
        cs.add(one("max all (ReduceSpec)", x -> x.get(0).max(), call("max", "T", (Object) null), f(5, 7)));
        cs.add(one("max all ties (ReduceSpec)", x -> x.get(0).max(), call("max", "T", (Object) null), ties(5, 7)));
        cs.add(one("max dims (ReduceSpec)", x -> x.get(0).max(new int[] {0, 2}, true),
            call("amax", "T,[i],b", null, List.of(0L, 2L), true), ties(4, 3, 5)));
        cs.add(aten("aten max", call("max", "T", (Object) null), ties(6, 5)));
        cs.add(aten("aten min", call("min", "T", (Object) null), ties(6, 5)));
        cs.add(aten("amax dim", call("amax", "T,[i]", null, List.of(1L)), ties(6, 5)));
        cs.add(aten("amin dims keepdim", call("amin", "T,[i],b", null, List.of(0L, -1L), true), ties(3, 6, 5)));
        cs.add(aten("max dim", call("max", "T,i", null, 1L), f(6, 5)));
        cs.add(aten("min dim keepdim", call("min", "T,i,b", null, 0L, true), f(6, 5)));
        cs.add(aten("addmm", call("addmm", "T,T,T|beta=f|alpha=f", null, null, null, 0.5, 2.0), f(1, 3), f(5, 7), f(7, 3)));
        cs.add(aten("addmv", call("addmv", "T,T,T", null, null, null), f(5), f(5, 7), f(7)));
        cs.add(aten("baddbmm", call("baddbmm", "T,T,T|alpha=f", null, null, null, 1.5), f(2, 5, 3), f(2, 5, 4), f(2, 4, 3)));
        cs.add(aten("einsum", call("einsum", "s,[T]", "bij,bjk->bik", List.of("a", "b")), f(2, 5, 4), f(2, 4, 3)));
        cs.add(aten("einsum summing a label", call("einsum", "s,[T]", "ij,k->ik", List.of("a", "b")), f(5, 4), f(3)));
        cs.add(aten("einsum implicit", call("einsum", "s,[T]", "ij,jk", List.of("a", "b")), f(5, 4), f(4, 3)));
        cs.add(aten("einsum ellipsis", call("einsum", "s,[T]", "...ij,...jk->...ik", List.of("a", "b")), f(2, 3, 5, 4), f(4, 3)));
        cs.add(aten("einsum ellipsis broadcast", call("einsum", "s,[T]", "...ij,...jk", List.of("a", "b")), f(2, 1, 5, 4), f(3, 4, 2)));
        cs.add(aten("einsum ellipsis in the middle", call("einsum", "s,[T]", "b...d,bd->b...", List.of("a", "b")), f(3, 2, 4, 5), f(3, 5)));
        cs.add(aten("conv2d", call("conv2d", "T,T,T,[i],[i]", null, null, null, List.of(2L, 1L), List.of(1L, 0L)),
            f(2, 3, 7, 6), f(4, 3, 3, 2), f(4)));
        cs.add(aten("conv2d groups dilation", call("conv2d", "T,T,n,[i],[i],[i],i", null, null, null, List.of(1L, 1L), List.of(1L, 1L),
            List.of(2L, 1L), 2L), f(2, 4, 7, 5), f(6, 2, 2, 3)));
        cs.add(aten("conv1d", call("conv1d", "T,T,T,[i]", null, null, null, List.of(2L)), f(3, 2, 9), f(5, 2, 3), f(5)));
        cs.add(aten("conv1d same", call("conv1d", "T,T,n,[i],s", null, null, null, List.of(1L), "same"), f(2, 9), f(3, 2, 3)));
        cs.add(aten("max_pool2d", call("max_pool2d", "T,[i],[i],[i]", null, List.of(3L, 2L), List.of(2L, 2L), List.of(1L, 0L)),
            f(2, 3, 7, 6)));
        cs.add(aten("conv3d", call("conv3d", "T,T,T,[i],[i]", null, null, null, List.of(1L, 2L, 1L), List.of(0L, 1L, 1L)),
            f(2, 2, 3, 5, 4), f(3, 2, 2, 3, 2), f(3)));
        cs.add(aten("conv_transpose2d", call("conv_transpose2d", "T,T,T,[i],[i],[i]", null, null, null, List.of(2L, 1L), List.of(1L, 0L),
            List.of(1L, 0L)), f(2, 3, 4, 5), f(3, 4, 3, 2), f(4)));
        cs.add(aten("conv_transpose1d groups dilation", call("conv_transpose1d", "T,T,n,[i],[i],[i],i,[i]", null, null, null, List.of(3L),
            List.of(1L), List.of(1L), 2L, List.of(2L)), f(2, 4, 5), f(4, 3, 3)));
        cs.add(aten("max_pool2d_with_indices", call("max_pool2d_with_indices", "T,[i],[i],[i],[i],b", null, List.of(2L, 3L), List.of(1L, 2L),
            List.of(1L, 1L), List.of(1L, 1L), true), f(2, 3, 6, 7)));
        cs.add(aten("max_pool1d", call("max_pool1d", "T,[i],[i],[i],[i],b", null, List.of(3L), List.of(2L), List.of(1L), List.of(2L), true),
            f(2, 3, 9)));
        cs.add(aten("avg_pool1d", call("avg_pool1d", "T,[i],[i],[i]", null, List.of(3L), List.of(2L), List.of(1L)), f(3, 8)));
        cs.add(aten("max_pool2d unbatched", call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), f(3, 5, 4)));
        cs.add(aten("avg_pool3d", call("avg_pool3d", "T,[i],[i],[i]", null, List.of(2L, 3L, 2L), List.of(1L, 2L, 2L), List.of(1L, 1L, 0L)),
            f(2, 2, 4, 5, 4)));
        cs.add(aten("adaptive_avg_pool2d", call("adaptive_avg_pool2d", "T,[i]", null, List.of(3L, 2L)), f(2, 3, 7, 5)));
        cs.add(aten("adaptive_avg_pool1d global", call("adaptive_avg_pool1d", "T,[i]", null, List.of(1L)), f(3, 2, 6)));
        cs.add(aten("adaptive_avg_pool3d unbatched", call("adaptive_avg_pool3d", "T,[i]", null, List.of(2L, 3L, 2L)), f(2, 3, 5, 4)));
        cs.add(aten("adaptive_max_pool2d", call("adaptive_max_pool2d", "T,[i]", null, List.of(3L, 2L)), f(2, 3, 7, 5)));
        cs.add(aten("adaptive_max_pool1d", call("adaptive_max_pool1d", "T,[i]", null, List.of(4L)), f(2, 3, 7)));
        cs.add(aten("avg_pool2d", call("avg_pool2d", "T,[i],[i],[i],b,b", null, List.of(3L, 2L), List.of(2L, 1L), List.of(1L, 1L),
            true, false), f(2, 3, 7, 6)));
        cs.add(aten("group_norm", call("group_norm", "T,i,T,T", null, 2L, null, null), f(3, 4, 5), f(4), f(4)));
        cs.add(aten("group_norm plain", call("group_norm", "T,i", null, 3L), f(2, 6, 2, 3)));
        cs.add(aten("batch_norm batch statistics", call("batch_norm", "T,T,T,n,n,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5,
            false), f(6, 4, 3), f(4), f(4)));
        cs.add(aten("batch_norm plain", call("batch_norm", "T,n,n,n,n,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5, false),
            f(5, 3)));
        cs.add(runningBatchNorm());
        cs.add(aten("index_select", call("index_select", "T,i,T", null, 1L, null), f(5, 6), idx(6, 8)));
        cs.add(aten("cumsum", call("cumsum", "T,i", null, -1L), f(5, 6)));
        cs.add(aten("prod", call("prod", "T", (Object) null), pos(3, 4)));
        cs.add(aten("prod signed", call("prod", "T", (Object) null), f(3, 4)));
        cs.add(aten("prod dim zeros", call("prod", "T,i", null, 1L), ties(6, 3)));
        cs.add(aten("prod dim keepdim", call("prod", "T,i,b", null, 0L, true), f(4, 3)));
        for (String u : List.of("abs", "square", "expm1", "erf", "softplus", "elu", "hardtanh", "leaky_relu", "relu6")) {
            cs.add(aten(u, call(u, "T", (Object) null), f(6, 5)));
        }
        cs.add(aten("log1p", call("log1p", "T", (Object) null), pos(6, 5)));
        cs.add(aten("leaky_relu slope", call("leaky_relu", "T,f", null, 0.2), f(6, 5)));
        cs.add(aten("clamp", call("clamp", "T,f,f", null, -0.5, 0.7), f(6, 5)));
        cs.add(aten("softplus_backward", call("softplus_backward", "T,T,f,f", null, null, 2.0, 1.0), f(6, 5), f(6, 5)));
        cs.add(aten("elu_backward", call("elu_backward", "T,f,f,f,b,T", null, 0.7, 1.2, 0.9, false, null), f(6, 5), f(6, 5)));
        cs.add(aten("sign", call("sign", "T", (Object) null), f(6, 5)));
        cs.add(aten("flip", call("flip", "T,[i]", null, List.of(0L, 2L)), f(3, 4, 5)));
        cs.add(whereWithNumber("where number other", call("where", "T,T,f", null, null, 0.5)));
        cs.add(whereWithNumber("where number self", call("where", "T,f,T", null, -1.5, null)));
        cs.add(aten("clamp tensors", call("clamp", "T,T,T", null, null, null), f(6, 5), f(5), f(6, 1)));
        cs.add(aten("clamp_min tensor", call("clamp_min", "T,T", null, null), f(6, 5), f(6, 5)));
        cs.add(aten("clamp_max tensor broadcast", call("clamp_max", "T,T", null, null), f(6, 5), f(1, 5)));
        cs.add(aten("clamp_min", call("clamp_min", "T,f", null, 0.1), f(6, 5)));
        cs.add(aten("clamp_max", call("clamp_max", "T,f", null, 0.1), f(6, 5)));
        cs.add(aten("maximum ties", call("maximum", "T,T", null, null), ties(6, 5), ties(6, 5)));
        cs.add(aten("minimum broadcast", call("minimum", "T,T", null, null), ties(6, 5), ties(5)));
        return cs;
    }

    /** {@code where} of a condition on the input (not differentiable), the input and a number, either way round. */
    private static Case whereWithNumber(String what, AtenCall c) {
        return new Case(what, xs -> dt.aten(c, xs.getFirst().gt(0.2), xs.getFirst()),
            ts -> c.call(List.of(ts.getFirst().gt(new Scalar(0.2)), ts.getFirst())), f(6, 5));
    }

    /** {@code batch_norm} in evaluation: running statistics, constants that require no grad, on every device whole. */
    private static Case runningBatchNorm() {
        AtenCall c = call("batch_norm", "T,T,T,T,T,b,f,f,b", null, null, null, null, null, false, 0.1, 1e-5, false);
        Tensor mean = torch.randn(4);
        Tensor variance = torch.rand(4).add(new Scalar(0.5));
        return new Case("batch_norm running statistics", xs -> {
            Placement[] whole = new Placement[xs.getFirst().mesh().ndim()];
            Arrays.fill(whole, Placement.replicate());
            DTensor m = dt.tensor(mean, xs.getFirst().mesh(), whole);
            DTensor v = dt.tensor(variance, xs.getFirst().mesh(), whole);
            return dt.aten(c, xs.get(0), xs.get(1), xs.get(2), m, v);
        }, ts -> c.call(List.of(ts.get(0), ts.get(1), ts.get(2), mean, variance)), f(3, 4, 5), f(4), f(4));
    }

    @Test
    void shouldDifferentiateModelOperatorsLikeTorchOnALineAndAGrid() {
        Random random = new Random(37);
        List<String> failures = new ArrayList<>();
        for (Case c : cases()) {
            for (int[] mesh : new int[][] {{4}, {2, 2}}) {
                String failure = check(c, dt.initDeviceMesh(mesh), random);
                if (failure != null) {
                    failures.add(failure);
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldKeepTheBatchShardThroughPoolingGradients() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        List<AtenCall> pools = List.of(call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), call("avg_pool2d", "T,[i]", null, List.of(3L, 2L)),
            call("adaptive_avg_pool2d", "T,[i]", null, List.of(4L, 1L)), call("adaptive_max_pool2d", "T,[i]", null, List.of(2L, 5L)));
        try (Tensor x = torch.randn(6, 3, 6, 6)) {
            for (AtenCall pool : pools) {
                DTensor dx = dt.tensor(x, line, Placement.shard(0)).requiresGrad_(true);
                DTensor y = dt.aten(pool, dx).getFirst();
                DTensor loss = y.mul(y).sum();
                assertEquals(0, allGathersIn(loss::backward), pool + ": the pooling gradient of a batch-sharded input gathers nothing");
                assertEquals(List.of(Placement.shard(0)), dx.grad().placements());
            }
        }
    }

    @Test
    void shouldGiveADataParallelConvolutionItsGradientsWithoutGathering() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        AtenCall conv = call("conv2d", "T,T,T,[i],[i]", null, null, null, List.of(1L, 1L), List.of(1L, 1L));
        try (Tensor x = torch.randn(6, 3, 5, 5); Tensor w = torch.randn(4, 3, 3, 3); Tensor b = torch.randn(4)) {
            DTensor dx = dt.tensor(x, line, Placement.shard(0)).requiresGrad_(true);
            DTensor dw = dt.tensor(w, line, Placement.replicate()).requiresGrad_(true);
            DTensor db = dt.tensor(b, line, Placement.replicate()).requiresGrad_(true);
            DTensor y = dt.aten(conv, dx, dw, db).getFirst();
            DTensor loss = y.mul(y).sum();
            assertEquals(0, allGathersIn(loss::backward), "the batch stays sharded: the weight's gradient is a partial sum, reduced once");
            assertEquals(List.of(Placement.shard(0)), dx.grad().placements());
            assertEquals(List.of(Placement.replicate()), dw.grad().placements());
            assertEquals(List.of(Placement.replicate()), db.grad().placements());
        }
    }

    /** The all-gathers the runtime ran for {@code work}, everything issued before it done first. */
    private static long allGathersIn(Runnable work) {
        dt.sync();
        Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
        work.run();
        dt.sync();
        Map<CollectiveKind, Long> after = dt.runtime().groups().collectiveCounter().snapshot();
        return after.getOrDefault(CollectiveKind.ALL_GATHER, 0L) - before.getOrDefault(CollectiveKind.ALL_GATHER, 0L);
    }

    @Tag("slow")
    @Test
    void shouldDifferentiateModelOperatorsLikeTorchOnManyRandomPlacements() {
        Random random = new Random(38);
        List<String> failures = new ArrayList<>();
        for (int round = 0; round < 8; round++) {
            for (Case c : cases()) {
                for (int[] mesh : new int[][] {{4}, {2, 2}, {2}, {3}}) {
                    String failure = check(c, dt.initDeviceMesh(mesh), random);
                    if (failure != null) {
                        failures.add(failure);
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }
}
