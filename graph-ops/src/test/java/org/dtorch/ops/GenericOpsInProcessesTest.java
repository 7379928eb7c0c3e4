package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The generic ATen operator ({@link AtenSpec}) with every device a worker process: the call crosses the control channel
 * ({@link AtenCallCodec}) and each worker finds the overload again by name. {@link GenericOpsTest}'s walks over every
 * pointwise operator and every reduction of the table, {@link ConcatSplitOpsTest}'s over the concat-split family, the
 * walks of the other families on a 2x2 mesh (the view family's reshapes and expand make their own call on each worker,
 * with the sizes of its shard), then focused checks: a pointwise operator with broadcasting, linear uses of partial sums,
 * reductions with keepdim, the replicated fallback, strings, dtypes and lists among the arguments, and halo convolutions.
 */
@Tag("multiprocess")
@Timeout(300)
class GenericOpsInProcessesTest {
    private static final Placement R = Placement.replicate();
    private static final ScalarType F = ScalarType.Float;
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = SharedWorkerProcesses.runtime();
    }

    /** {@code c} on whole local tensors, in this process: what the workers' result must be. */
    private static Tensor want(AtenCall c, Tensor... locals) {
        List<Tensor> out = c.call(List.of(locals));
        out.subList(1, out.size()).forEach(Tensor::close);
        return out.getFirst();
    }

    private static void assertClose(Tensor want, DTensor got, String what) {
        try (Tensor value = got.toTorch()) {
            assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(value.sizes().vec().get()), what);
            assertEquals(want.scalar_type().intern(), value.scalar_type().intern(), what);
            assertTrue(torch.allclose(value, want, 1e-5, 1e-6, true), what + ": got " + value + " want " + want);
        }
    }

    /**
     * Every fourth pointwise operator of the table: their calls cross to the workers through the one generic codec
     * ({@link AtenCallCodecTest} covers its argument kinds), and {@link GenericOpsTest} walks them all in threads.
     */
    @Test
    void shouldRunPointwiseOperatorsOfTheTableLikeTorch() {
        GenericOpsTest.walkPointwise(dt, 4);
    }

    @Test
    @Tag("slow")
    void shouldRunEveryPointwiseOperatorOfTheTableLikeTorch() {
        GenericOpsTest.walkPointwise(dt);
    }

    /** In the slow run: every build runs the table's reductions in threads and random reductions in worker processes (DifferentialInProcessesTest). */
    @Test
    @Tag("slow")
    void shouldRunEveryReductionOfTheTableLikeTorch() {
        GenericOpsTest.walkReductions(dt);
    }

    /**
     * Tensor lists cross the control channel as input runs; list returns come back as one output per tensor. In the slow
     * run: every build sends concatenations and splits to worker processes in DifferentialInProcessesTest's programs.
     */
    @Test
    @Tag("slow")
    void shouldRunEveryConcatSplitOperatorLikeTorch() {
        ConcatSplitOpsTest.walk(dt, 1);
    }

    @Test
    void shouldRunEveryMatrixProductOfTheTableLikeTorch() {
        MatmulOpsTest.walk(dt, new int[][] {{2, 2}}, 1);
    }

    @Test
    void shouldRunTheNormalizationEmbeddingAndDropoutFamiliesLikeTorch() {
        NormOpsTest.walk(dt, new int[][] {{2, 2}}, 1);
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor w = torch.randn(9, 4); Tensor idx = torch.randint(0, 9, new long[] {6});
             DTensor dw = dt.tensor(w, mesh, Placement.shard(0), Placement.shard(0)); DTensor di = dt.tensor(idx, mesh, R, R)) {
            GenericOpsTest.assertLikeTorch(dt, call("embedding", "T,T", null, null), List.of(w, idx), List.of(dw, di), mesh.shape());
        }
    }

    /** Tagged slow: every build walks these in threads, and convolves with halos in worker processes (below). */
    @Test
    @Tag("slow")
    void shouldRunConvolutionsPoolingInterpolationAndAttentionLikeTorch() {
        ConvolutionOpsTest.walkConvolutions(dt, 1);
        ConvolutionOpsTest.walkPoolingAndInterpolation(dt, 1);
        ConvolutionOpsTest.walkAttention(dt, 2);
    }

    /** Height-sharded convolutions exchange halo rows between the worker processes' groups (the counts stay in the workers). */
    @Test
    void shouldConvolveHeightShardsWithHalos() {
        HaloConvolutionTest.checkHaloCases(dt, false, new HaloConvolutionTest.Layout(new int[] {3}, HaloConvolutionTest.ROWS),
            new HaloConvolutionTest.Layout(new int[] {2, 2}, R, HaloConvolutionTest.ROWS));
    }

    @Test
    void shouldRunTheViewFamilyLikeTorchWithPerDeviceCalls() {
        ViewOpsTest.walk(dt, new int[][] {{2, 2}});
    }

    @Test
    void shouldRunPointwiseOperatorsWithBroadcastingOnRandomPlacements() {
        List<AtenCall> calls = List.of(call("add", "T,T", null, null), call("mul", "T,T", null, null),
            call("clamp", "T,f,f", null, 0.2, 0.7), call("where", "T,T,T", null, null, null), call("lerp", "T,T,f", null, null, 0.3));
        List<ScalarType[]> dtypes = List.of(new ScalarType[] {F, F}, new ScalarType[] {F, F}, new ScalarType[] {F},
            new ScalarType[] {ScalarType.Bool, F, F}, new ScalarType[] {F, F});
        for (int i = 0; i < calls.size(); i++) {
            for (int[] mesh : new int[][] {{2}, {2, 2}}) {
                GenericOpsTest.checkAgainstTorch(dt, calls.get(i), dtypes.get(i), mesh, true);
            }
        }
    }

    @Test
    void shouldKeepShardsOfABroadcastAddAndPartialSumsOfLinearOperators() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = torch.rand(10, 6); Tensor b = torch.rand(6);
             DTensor da = dt.tensor(a, mesh, Placement.shard(0)); DTensor db = dt.tensor(b, mesh, Placement.shard(0))) {
            AtenCall add = call("add", "T,T", null, null);
            try (DTensor sum = dt.aten(add, da, db).getFirst(); Tensor want = want(add, a, b)) {
                assertEquals(List.of(Placement.shard(0)), sum.placements());
                assertClose(want, sum, "broadcast add");
            }
            AtenCall times3 = call("mul", "T,f", null, 3.0);
            try (DTensor p = da.redistribute(Placement.partial()); DTensor q = da.redistribute(Placement.partial());
                 DTensor pq = dt.aten(add, p, q).getFirst(); DTensor p3 = dt.aten(times3, p).getFirst();
                 Tensor twice = want(add, a, a); Tensor thrice = want(times3, a)) {
                assertEquals(List.of(Placement.partial()), pq.placements());
                assertEquals(List.of(Placement.partial()), p3.placements());
                assertClose(twice, pq, "partial + partial");
                assertClose(thrice, p3, "partial * 3.0");
            }
        }
    }

    /**
     * Two partial sums moved in one operator ({@link RedistributeAllSpec} through its codec), reduce-scattered together
     * (a cheaper move than two all-reduces to R): {@code maximum} is linear in neither input.
     */
    @Test
    void shouldReduceScatterTwoPartialSumInputsInOneOperator() {
        assertPartialSumProduct(call("maximum", "T,T", null, null), Placement.shard(0));
    }

    /** {@code mul} is linear in each factor: one partial sum is reduced and the product stays partial. */
    @Test
    void shouldReduceOneOfTwoPartialSumFactorsInOneOperator() {
        assertPartialSumProduct(call("mul", "T,T", null, null), Placement.partial());
    }

    private static void assertPartialSumProduct(AtenCall c, Placement expected) {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = torch.rand(10, 6); Tensor b = torch.rand(10, 6); Tensor want = want(c, a, b);
             DTensor da = dt.tensor(a, mesh, R); DTensor db = dt.tensor(b, mesh, R);
             DTensor p = da.redistribute(Placement.partial()); DTensor q = db.redistribute(Placement.partial());
             DTensor pq = dt.aten(c, p, q).getFirst()) {
            assertEquals(List.of(expected), pq.placements());
            assertClose(want, pq, c + " of two partial sums");
        }
    }

    @Test
    void shouldReduceWithKeepdimToPartialsAndKeptShards() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor a = torch.rand(6, 8, 5); DTensor da = dt.tensor(a, mesh, Placement.shard(0), Placement.shard(1))) {
            AtenCall sum = call("sum", "T|dim=[i]|keepdim=b", null, List.of(1L), true);
            try (DTensor s = dt.aten(sum, da).getFirst(); Tensor want = want(sum, a)) {
                assertEquals(List.of(Placement.shard(0), Placement.partial()), s.placements());
                assertClose(want, s, "sum(dim=[1], keepdim=True)");
            }
            AtenCall amax = call("amax", "T|dim=[i]|keepdim=b", null, List.of(0L), true);
            try (DTensor m = dt.aten(amax, da).getFirst(); Tensor want = want(amax, a)) {
                assertEquals(List.of(Placement.partial(ReduceOpType.MAX), Placement.shard(1)), m.placements());
                assertClose(want, m, "amax(dim=[0], keepdim=True)");
            }
            AtenCall toDouble = call("sum", "T|dim=[i]|keepdim=b|dtype=d", null, List.of(2L), false, ScalarType.Double);
            try (DTensor d = dt.aten(toDouble, da).getFirst(); Tensor want = want(toDouble, a)) {
                assertEquals(ScalarType.Double, d.meta().dtype(), "the dtype argument crossed");
                assertClose(want, d, "sum(dim=[2], dtype=float64)");
            }
        }
    }

    @Test
    void shouldRunAnOperatorWithoutStrategyOnReplicatedInputs() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        AtenCall tril = call("tril", "T,i", null, 0L);
        assertEquals("replicate", StrategyTable.of(tril).family());
        try (Tensor a = torch.rand(6, 5); DTensor da = dt.tensor(a, mesh, Placement.shard(0), Placement.shard(1));
             DTensor out = dt.aten(tril, da).getFirst(); Tensor want = want(tril, a)) {
            assertEquals(List.of(R, R), out.placements());
            assertClose(want, out, "tril");
        }
    }

    /** A mean loss over batch-sharded rows all-reduces the total weight inside its kernel, between the worker processes. */
    @Test
    void shouldAverageABatchShardedLossOverTheWorkersRows() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        AtenCall loss = call("cross_entropy_loss", "T,T,T,i,i,f", null, null, null, 1L, 2L, 0.1);
        try (Tensor x = torch.randn(7, 5); Tensor t = torch.randint(0, 5, new long[] {7}); Tensor w = torch.rand(5);
             DTensor out = dt.aten(loss, dt.tensor(x, mesh, Placement.shard(0), R), dt.tensor(t, mesh, Placement.shard(0), R),
                 dt.tensor(w, mesh, R, R)).getFirst(); Tensor want = want(loss, x, t, w)) {
            assertEquals(List.of(Placement.partial(), R), out.placements(), "each device's share of the mean");
            assertClose(want, out, "the mean loss over uneven batch shards, class weights and an ignored class");
        }
    }

    @Test
    void shouldPassStringArgumentsToTheWorkers() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        AtenCall floorDiv = call("div", "T,T|rounding_mode=s", null, null, "floor");
        AtenCall gelu = call("gelu", "T|approximate=s", null, "tanh");
        try (Tensor a = torch.rand(4, 6); Tensor b = torch.rand(4, 6);
             DTensor da = dt.tensor(a, mesh, Placement.shard(1)); DTensor db = dt.tensor(b, mesh, Placement.shard(1));
             DTensor q = dt.aten(floorDiv, da, db).getFirst(); DTensor g = dt.aten(gelu, da).getFirst();
             Tensor wantQ = want(floorDiv, a, b); Tensor wantG = want(gelu, a)) {
            assertEquals(List.of(Placement.shard(1)), q.placements());
            assertClose(wantQ, q, "div(rounding_mode='floor')");
            assertClose(wantG, g, "gelu(approximate='tanh')");
        }
    }
}
