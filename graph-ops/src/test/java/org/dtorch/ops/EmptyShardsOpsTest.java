package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every operator family on inputs whose shards are empty on some devices, as PyTorch's DTensor gives them: a batch of 2
 * on 4 devices ({@code 1, 1, 0, 0}), 3 rows on a 2x2 mesh sharded by both mesh dimensions ({@code 1, 1, 1, 0}), a
 * column split {@code 1, 0}, and tensors with no element at all (a zero-length narrow). Each result is compared with
 * libtorch on the whole tensors on one device: factories, pointwise operators, every reduction (the identity of an
 * empty shard: sums, products, extrema, arg-extrema, variances, norms, logical reductions), matrix products, views,
 * concatenation and splits, normalization, embedding, convolution with its halo, pooling, interpolation, attention and
 * dropout. {@link EmptyShardsInProcessesTest} runs the same walk with worker processes, {@link EmptyShardsAcrossNodesTest}
 * across two nodes, {@link EmptyShardsOnCudaTest} and {@link EmptyShardsOnCudaInProcessesTest} on a GPU.
 */
@Timeout(600)
class EmptyShardsOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement S2 = Placement.shard(2);

    /** One check: {@code call} on the whole {@code inputs}, each distributed with its placements over {@code mesh}. */
    record Case(String what, AtenCall call, int[] mesh, List<Tensor> inputs, List<Placement[]> placements) {
    }

    private static Case of(String what, AtenCall call, int[] mesh, Tensor input, Placement... placements) {
        return new Case(what, call, mesh, List.of(input), Collections.singletonList(placements));
    }

    private static Case of(String what, AtenCall call, int[] mesh, List<Tensor> inputs, List<Placement[]> placements) {
        return new Case(what, call, mesh, inputs, placements);
    }

    private static Placement[] p(Placement... ps) {
        return ps;
    }

    private static final int[] LINE = {4};
    private static final int[] GRID = {2, 2};

    @Test
    void shouldGiveTheLastDevicesEmptyShards() {
        DeviceMesh line = dt.initDeviceMesh(LINE);
        try (Tensor x = torch.randn(2, 8); DTensor dx = dt.tensor(x, line, S0)) {
            ShardLayout layout = dx.meta().layout();
            assertEquals("[[1, 8], [1, 8], [0, 8], [0, 8]]", Arrays.deepToString(line.deviceIds().stream().map(layout::localShape).toArray()));
            try (Tensor back = dx.toTorch()) {
                assertTrue(torch.equal(back, x));
            }
        }
    }

    @Test
    void shouldRunEveryFamilyLikeTorchWithEmptyShards() {
        List<String> failures = walk(dt);
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldMakeTheSameFactoryValuesOnEveryMesh() {
        assertEquals(List.of(), factories(dt));
    }

    @Test
    void shouldRunTheJavaApiLikeTorchWithEmptyShards() {
        assertEquals(List.of(), api(dt));
    }

    /** As torch, a maximum over a dimension with no element at all has no value; empty shards of a longer one are fine. */
    @Test
    void shouldRefuseTheMaximumOfNothingBeforeRunning() {
        DeviceMesh line = dt.initDeviceMesh(LINE);
        try (DTensor nothing = dt.zeros(new long[] {0, 3}, line, S0)) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> nothing.max(0));
            assertTrue(e.getMessage().contains("max: dimension 0 of") && e.getMessage().contains("has no element"), e.getMessage());
            org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class,
                () -> dt.aten(call("amax", "T|dim=[i]", null, List.of(0L)), nothing));
            try (DTensor sum = nothing.sum(0); Tensor zeros = sum.toTorch()) {
                assertTrue(torch.equal(zeros, torch.zeros(3)), "the sum of nothing is zeros: " + zeros);
            }
        }
    }

    /** One check of the Java API: what it computes on the distributed {@code x}, and what torch computes on the whole one. */
    private record ApiCase(String what, java.util.function.Function<DTensor, DTensor> distributed, java.util.function.Function<Tensor, Tensor> whole) {
    }

    /**
     * The hand-written operators of {@link DTensor} and {@link DTorch} on a batch of 2 on 4 devices and on 3 rows on a
     * 2x2 mesh sharded by both mesh dimensions: sums, means (divided by the global count) and maxima over the sharded
     * dimension, element-wise operators, casts, shapes, products, softmax, concatenation, redistribution to R, S(1) and
     * back, a zero-length narrow, and an in-place copy; the mismatches.
     */
    static List<String> api(DTorch runtime) {
        List<ApiCase> cases = List.of(
            new ApiCase("sum(0)", d -> d.sum(0), t -> t.sum(new long[] {0})),
            new ApiCase("sum()", d -> d.sum(), t -> t.sum()),
            new ApiCase("mean(0)", d -> d.mean(0), t -> t.mean(new long[] {0})),
            new ApiCase("mean(0, keepdim)", d -> d.mean(new int[] {0}, true), t -> t.mean(new long[] {0}, true, new org.bytedeco.pytorch.ScalarTypeOptional())),
            new ApiCase("max(0)", d -> d.max(0), t -> t.amax(new long[] {0}, false)),
            new ApiCase("max()", d -> d.max(), t -> t.amax(new long[] {0, 1}, false)),
            new ApiCase("max(1)", d -> d.max(1), t -> t.amax(new long[] {1}, false)),
            new ApiCase("mul(2).add(1).relu()", d -> d.mul(2.0).add(1.0).relu(), t -> t.mul(new Scalar(2.0)).add(new Scalar(1.0)).relu()),
            new ApiCase("add(self)", d -> d.add(d), t -> t.add(t)),
            new ApiCase("to(float64)", d -> d.to(ScalarType.Double), t -> t.to(ScalarType.Double)),
            new ApiCase("transpose", d -> d.transpose(0, 1), t -> t.transpose(0, 1).contiguous()),
            new ApiCase("reshape(-1)", d -> d.reshape(-1), t -> t.reshape(-1)),
            new ApiCase("narrow to nothing", d -> d.narrow(0, 1, 0), t -> t.narrow(0, 1, 0)),
            new ApiCase("narrow to 1 row", d -> d.narrow(0, 1, 1), t -> t.narrow(0, 1, 1)),
            new ApiCase("softmax(-1)", d -> d.softmax(-1), t -> t.softmax(-1)),
            new ApiCase("softmax(0)", d -> d.softmax(0), t -> t.softmax(0)),
            new ApiCase("matmul(x^T)", d -> d.matmul(d.transpose(0, 1)), t -> t.matmul(t.t())),
            new ApiCase("cat with itself", d -> d.runtime().cat(List.of(d, d), 0), t -> torch.cat(new org.bytedeco.pytorch.TensorArrayRef(
                new org.bytedeco.pytorch.TensorVector(t, t)), 0)),
            new ApiCase("redistribute to R", d -> d.redistribute(replicated(d)), t -> t.clone()),
            new ApiCase("redistribute to S(1)", d -> d.redistribute(shardLast(d)), t -> t.clone()),
            new ApiCase("redistribute to P and back", d -> {
                try (DTensor partial = d.redistribute(partial(d))) {
                    return partial.redistribute(d.placements().toArray(Placement[]::new));
                }
            }, t -> t.clone()),
            new ApiCase("copy_ into zeros", d -> {
                DTensor into = d.runtime().zeros(d.shape(), d.mesh(), shardLast(d));
                return into.copy_(d);
            }, t -> t.clone()));
        List<String> failures = new ArrayList<>();
        DeviceMesh line = runtime.initDeviceMesh(LINE);
        DeviceMesh grid = runtime.initDeviceMesh(GRID);
        torch.manual_seed(5);
        try (Tensor batch = torch.randn(2, 8); Tensor rows = torch.randn(3, 4);
             DTensor dBatch = runtime.tensor(batch, line, S0); DTensor dRows = runtime.tensor(rows, grid, S0, S0)) {
            for (ApiCase c : cases) {
                for (DTensor d : List.of(dBatch, dRows)) {
                    Tensor whole = d == dBatch ? batch : rows;
                    String what = c.what() + " on " + Arrays.toString(whole.sizes().vec().get()) + " " + d.placements();
                    try (DTensor out = c.distributed().apply(d); Tensor got = out.toTorch(); Tensor want = c.whole().apply(whole)) {
                        if (!Arrays.equals(want.sizes().vec().get(), got.sizes().vec().get()) || !torch.allclose(got, want, 1e-5, 1e-6, true)) {
                            failures.add(what + ": got " + got + " want " + want);
                        }
                    } catch (RuntimeException e) {
                        failures.add(what + ": " + firstLine(e));
                    }
                }
            }
        }
        return failures;
    }

    private static Placement[] replicated(DTensor d) {
        Placement[] ps = new Placement[d.mesh().ndim()];
        Arrays.fill(ps, R);
        return ps;
    }

    private static Placement[] shardLast(DTensor d) {
        Placement[] ps = replicated(d);
        ps[ps.length - 1] = S1;
        return ps;
    }

    private static Placement[] partial(DTensor d) {
        Placement[] ps = d.placements().toArray(Placement[]::new);
        ps[0] = Placement.partial();
        return ps;
    }

    /** Every case of {@link #cases()} on {@code runtime}; the mismatches and failures, each naming its case. */
    static List<String> walk(DTorch runtime) {
        List<String> failures = new ArrayList<>();
        for (Case c : cases()) {
            try {
                check(runtime, c);
            } catch (Throwable e) {
                failures.add(c.what() + " (" + c.call() + "): " + firstLine(e));
            } finally {
                c.inputs().forEach(Tensor::close);
            }
        }
        return failures;
    }

    private static String firstLine(Throwable e) {
        String m = String.valueOf(e.getMessage());
        int nl = m.indexOf('\n');
        return e.getClass().getSimpleName() + ": " + (nl < 0 ? m : m.substring(0, nl));
    }

    private static void check(DTorch runtime, Case c) {
        DeviceMesh mesh = runtime.initDeviceMesh(c.mesh());
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (int i = 0; i < c.inputs().size(); i++) {
                inputs.add(runtime.tensor(c.inputs().get(i), mesh, c.placements().get(i)));
            }
            GenericOpsTest.assertLikeTorch(runtime, c.call(), c.inputs(), inputs, c.mesh());
        } finally {
            inputs.forEach(DTensor::close);
        }
    }

    /** {@code zeros}, {@code ones}, {@code full}, {@code arange}, {@code rand} and {@code randn} with empty shards equal those on one device. */
    static List<String> factories(DTorch runtime) {
        List<String> failures = new ArrayList<>();
        DeviceMesh one = runtime.initDeviceMesh(new int[] {1});
        DeviceMesh line = runtime.initDeviceMesh(LINE);
        DeviceMesh grid = runtime.initDeviceMesh(GRID);
        record Made(String what, java.util.function.BiFunction<DeviceMesh, Placement[], DTensor> make, Placement[] on4, Placement[] on2x2) {
        }

        long[] batch = {2, 3};
        long[] none = {0, 3};
        List<Made> made = List.of(
            new Made("zeros", (m, ps) -> runtime.zeros(batch, m, ps), p(S0), p(S0, S0)),
            new Made("ones", (m, ps) -> runtime.ones(batch, m, ps), p(S0), p(S0, S1)),
            new Made("full", (m, ps) -> runtime.full(2.5, batch, m, ps), p(S1), p(S1, S0)),
            new Made("arange", (m, ps) -> runtime.arange(0, 3, 1, ScalarType.Long, m, ps), p(S0), p(S0, S0)),
            new Made("rand", (m, ps) -> runtime.rand(7, batch, m, ps), p(S0), p(S0, S0)),
            new Made("randn", (m, ps) -> runtime.randn(7, new long[] {3, 2}, m, ps), p(S0), p(S0, S0)),
            new Made("randn of nothing", (m, ps) -> runtime.randn(7, none, m, ps), p(S0), p(S1, S0)),
            new Made("zeros of nothing", (m, ps) -> runtime.zeros(none, m, ps), p(S0), p(S0, S0)));
        for (Made m : made) {
            try (DTensor whole = m.make().apply(one, p(R)); Tensor want = whole.toTorch();
                 DTensor onLine = m.make().apply(line, m.on4()); Tensor gotLine = onLine.toTorch();
                 DTensor onGrid = m.make().apply(grid, m.on2x2()); Tensor gotGrid = onGrid.toTorch()) {
                if (!torch.equal(want, gotLine)) {
                    failures.add(m.what() + " on " + Arrays.toString(m.on4()) + ": " + gotLine + " want " + want);
                }
                if (!torch.equal(want, gotGrid)) {
                    failures.add(m.what() + " on 2x2 " + Arrays.toString(m.on2x2()) + ": " + gotGrid + " want " + want);
                }
            } catch (RuntimeException e) {
                failures.add(m.what() + ": " + firstLine(e));
            }
        }
        return failures;
    }

    /** Values in [0.5, 1.5): no zero, so products and quotients are tame. */
    private static Tensor positive(long... shape) {
        try (Tensor u = torch.rand(shape); Scalar half = new Scalar(0.5)) {
            return u.add(half);
        }
    }

    private static Tensor ints(long... shape) {
        return torch.randint(-8, 8, shape);
    }

    private static Tensor bools(long... shape) {
        try (Tensor u = torch.rand(shape); Scalar half = new Scalar(0.5)) {
            return u.gt(half);
        }
    }

    /** The cases, one or more per family; fresh tensors each time (the walk closes them). */
    static List<Case> cases() {
        torch.manual_seed(11);
        List<Case> out = new ArrayList<>();
        // Pointwise.
        out.add(of("relu, batch 2 on 4", call("relu", "T", (Object) null), LINE, torch.randn(2, 8), S0));
        out.add(of("add broadcast, batch 2 on 4", call("add", "T,T", null, null), LINE, List.of(torch.randn(2, 8), torch.randn(8)), List.of(p(S0), p(R))));
        out.add(of("mul, 3 rows on 2x2", call("mul", "T,T", null, null), GRID, List.of(torch.randn(3, 5), torch.randn(3, 5)),
            List.of(p(S0, S0), p(S0, S0))));
        out.add(of("where, columns 1 over 2", call("where", "T,T,T", null, null, null), GRID,
            List.of(bools(3, 1), torch.randn(3, 1), torch.randn(3, 1)), List.of(p(S0, S1), p(S0, S1), p(S0, S1))));
        out.add(of("exp of nothing", call("exp", "T", (Object) null), LINE, torch.randn(0, 4), S0));
        // Reductions over the sharded dimension: an empty shard contributes the identity.
        for (String name : List.of("sum", "mean", "amax", "amin", "nansum", "logsumexp", "var", "std", "linalg_vector_norm")) {
            out.add(of(name + " over a batch of 2 on 4", call(name, "T|dim=[i]", null, List.of(0L)), LINE, torch.randn(2, 5), S0));
            out.add(of(name + " keepdim over 3 rows on 2x2", call(name, "T|dim=[i]|keepdim=b", null, List.of(0L), true), GRID,
                torch.randn(3, 4), S0, S0));
        }
        out.add(of("sum over the other dim, batch 2 on 4", call("sum", "T|dim=[i]", null, List.of(1L)), LINE, torch.randn(2, 5), S0));
        out.add(of("sum of everything, batch 2 on 4", call("sum", "T", (Object) null), LINE, torch.randn(2, 5), S0));
        out.add(of("sum of nothing", call("sum", "T|dim=[i]", null, List.of(0L)), LINE, torch.randn(0, 5), S0));
        out.add(of("sum over nothing, the rows sharded", call("sum", "T|dim=[i]", null, List.of(1L)), LINE, torch.randn(3, 0), S0));
        out.add(of("mean of everything, columns 1 over 2", call("mean", "T", (Object) null), GRID, torch.randn(3, 1), S0, S1));
        out.add(of("prod of ints, batch 2 on 4", call("prod", "T,i", null, 0L), LINE, ints(2, 5), S0));
        out.add(of("prod, 3 rows on 2x2", call("prod", "T,i|keepdim=b", null, 0L, true), GRID, positive(3, 4), S0, S0));
        out.add(of("amax of ints, batch 2 on 4", call("amax", "T|dim=[i]", null, List.of(0L)), LINE, ints(2, 5), S0));
        out.add(of("amin of ints, 3 rows on 2x2", call("amin", "T|dim=[i]", null, List.of(0L)), GRID, ints(3, 5), S0, S0));
        out.add(of("max.dim, batch 2 on 4", call("max", "T,i|keepdim=b", null, 0L, false), LINE, torch.randn(2, 5), S0));
        out.add(of("min.dim, 3 rows on 2x2", call("min", "T,i|keepdim=b", null, 0L, true), GRID, torch.randn(3, 5), S0, S0));
        out.add(of("max of everything, batch 2 on 4", call("max", "T", (Object) null), LINE, torch.randn(2, 5), S0));
        out.add(of("argmax, batch 2 on 4", call("argmax", "T|dim=i|keepdim=b", null, 0L, false), LINE, torch.randn(2, 5), S0));
        out.add(of("argmin, 3 rows on 2x2", call("argmin", "T|dim=i|keepdim=b", null, 0L, true), GRID, torch.randn(3, 5), S0, S0));
        out.add(of("norm, batch 2 on 4", call("norm", "T,f,[i]|keepdim=b", null, 2.0, List.of(0L), false), LINE, torch.randn(2, 5), S0));
        out.add(of("all, batch 2 on 4", call("all", "T,i|keepdim=b", null, 0L, false), LINE, bools(2, 5), S0));
        out.add(of("any, 3 rows on 2x2", call("any", "T,i|keepdim=b", null, 0L, false), GRID, bools(3, 5), S0, S0));
        out.add(of("all of everything, batch 2 on 4", call("all", "T", (Object) null), LINE, bools(2, 5), S0));
        out.add(of("count_nonzero, batch 2 on 4", call("count_nonzero", "T,[i]", null, List.of(0L)), LINE, bools(2, 5).to(ScalarType.Float), S0));
        // Matrix products: a sharded contraction dimension with empty shards sums nothing there.
        out.add(of("mm, batch 2 on 4", call("mm", "T,T", null, null), LINE, List.of(torch.randn(2, 6), torch.randn(6, 3)), List.of(p(S0), p(R))));
        out.add(of("mm over a contraction of 3 on 4", call("mm", "T,T", null, null), LINE, List.of(torch.randn(5, 3), torch.randn(3, 4)),
            List.of(p(S1), p(S0))));
        out.add(of("mm, 3 rows and 1 column on 2x2", call("mm", "T,T", null, null), GRID, List.of(torch.randn(3, 4), torch.randn(4, 1)),
            List.of(p(S0, R), p(R, S1))));
        out.add(of("linear, batch 2 on 4", call("linear", "T,T,T", null, null, null), LINE,
            List.of(torch.randn(2, 6), torch.randn(3, 6), torch.randn(3)), List.of(p(S0), p(R), p(R))));
        out.add(of("linear, out features 3 on 4", call("linear", "T,T,T", null, null, null), LINE,
            List.of(torch.randn(5, 6), torch.randn(3, 6), torch.randn(3)), List.of(p(R), p(S0), p(S0))));
        out.add(of("bmm, batch 2 on 4", call("bmm", "T,T", null, null), LINE, List.of(torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
            List.of(p(S0), p(S0))));
        out.add(of("einsum, batch 2 on 4", call("einsum", "s,[T]", "bij,bjk->bik", Collections.nCopies(2, null)), LINE,
            List.of(torch.randn(2, 3, 4), torch.randn(2, 4, 5)), List.of(p(S0), p(S0))));
        // Views.
        out.add(of("view, batch 2 on 4", call("view", "T,[i]", null, List.of(2L, 2L, 4L)), LINE, torch.randn(2, 8), S0));
        out.add(of("reshape flattening the sharded dim", call("reshape", "T,[i]", null, List.of(16L)), LINE, torch.randn(2, 8), S0));
        out.add(of("reshape, 3 rows on 2x2", call("reshape", "T,[i]", null, List.of(3L, 2L, 2L)), GRID, torch.randn(3, 4), S0, S0));
        out.add(of("transpose, batch 2 on 4", call("transpose", "T,i,i", null, 0L, 1L), LINE, torch.randn(2, 8), S0));
        out.add(of("permute, 3 rows on 2x2", call("permute", "T,[i]", null, List.of(2L, 0L, 1L)), GRID, torch.randn(3, 2, 4), S0, S0));
        out.add(of("unsqueeze, batch 2 on 4", call("unsqueeze", "T,i", null, 0L), LINE, torch.randn(2, 8), S0));
        out.add(of("flatten, batch 2 on 4", call("flatten", "T,i,i", null, 0L, 1L), LINE, torch.randn(2, 3, 4), S0));
        out.add(of("narrow to nothing", call("narrow", "T,i,i,i", null, 0L, 1L, 0L), LINE, torch.randn(6, 3), S0));
        out.add(of("narrow leaving 2 rows on 4", call("narrow", "T,i,i,i", null, 0L, 1L, 2L), LINE, torch.randn(6, 3), S0));
        out.add(of("slice with a step, batch 2 on 4", call("slice", "T,i,i,i,i", null, 1L, 1L, 7L, 3L), LINE, torch.randn(2, 8), S0));
        out.add(of("expand, batch 2 on 4", call("expand", "T,[i]", null, List.of(2L, 3L, 8L)), LINE, torch.randn(2, 1, 8), S0));
        out.add(of("select on the sharded dim", call("select", "T,i,i", null, 0L, 1L), LINE, torch.randn(2, 8), S0));
        // Concatenation and splits.
        out.add(of("cat on the sharded dim", call("cat", "[T],i", Collections.nCopies(2, null), 0L), LINE,
            List.of(torch.randn(2, 3), torch.randn(1, 3)), List.of(p(S0), p(S0))));
        out.add(of("cat beside the sharded dim", call("cat", "[T],i", Collections.nCopies(2, null), 1L), LINE,
            List.of(torch.randn(2, 3), torch.randn(2, 1)), List.of(p(S0), p(S0))));
        out.add(of("stack, batch 2 on 4", call("stack", "[T],i", Collections.nCopies(2, null), 0L), LINE,
            List.of(torch.randn(2, 3), torch.randn(2, 3)), List.of(p(S0), p(S0))));
        out.add(of("split on the sharded dim", call("split", "T,i,i", null, 1L, 0L), LINE, torch.randn(2, 3), S0));
        out.add(of("chunk beside the sharded dim", call("chunk", "T,i,i", null, 2L, 1L), LINE, torch.randn(2, 4), S0));
        // Normalization, embedding, dropout.
        out.add(of("softmax, batch 2 on 4", call("softmax", "T,i", null, -1L), LINE, torch.randn(2, 8), S0));
        out.add(of("log_softmax over the sharded dim", call("log_softmax", "T,i", null, 0L), LINE, torch.randn(2, 8), S0));
        out.add(of("layer_norm, batch 2 on 4", call("layer_norm", "T,[i],T,T", null, List.of(8L), null, null), LINE,
            List.of(torch.randn(2, 8), torch.randn(8), torch.randn(8)), List.of(p(S0), p(R), p(R))));
        out.add(of("rms_norm, 3 rows on 2x2", call("rms_norm", "T,[i],T", null, List.of(4L), null), GRID,
            List.of(torch.randn(3, 4), torch.randn(4)), List.of(p(S0, S0), p(R, R))));
        out.add(of("group_norm, batch 2 on 4", call("group_norm", "T,i,T,T", null, 2L, null, null), LINE,
            List.of(torch.randn(2, 4, 3), torch.randn(4), torch.randn(4)), List.of(p(S0), p(R), p(R))));
        out.add(of("batch_norm in training, batch 2 on 4", call("batch_norm", "T,T,T,n,n,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5, false),
            LINE, List.of(torch.randn(2, 3, 4), torch.randn(3), torch.randn(3)), List.of(p(S0), p(R), p(R))));
        out.add(of("embedding of 3 rows on 4", call("embedding", "T,T", null, null), LINE,
            List.of(torch.randn(3, 4), torch.randint(0, 3, new long[] {2, 5})), List.of(p(S0), p(R))));
        out.add(of("embedding, batch 2 on 4", call("embedding", "T,T", null, null), LINE,
            List.of(torch.randn(6, 4), torch.randint(0, 6, new long[] {2, 5})), List.of(p(R), p(S0))));
        out.add(of("embedding of 3 rows on 2x2", call("embedding", "T,T", null, null), GRID,
            List.of(torch.randn(3, 4), torch.randint(0, 3, new long[] {5})), List.of(p(S0, S0), p(R, R))));
        out.add(of("dropout in eval, batch 2 on 4", call("dropout", "T,f,b", null, 0.5, false), LINE, torch.randn(2, 8), S0));
        // Convolution (batch, and height with its halo), pooling, interpolation, attention.
        out.add(of("conv2d, batch 2 on 4", call("conv2d", "T,T,T,[i],[i]", null, null, null, List.of(1L, 1L), List.of(1L, 1L)), LINE,
            List.of(torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(4)), List.of(p(S0), p(R), p(R))));
        out.add(of("conv2d, height 3 on 4 with a halo", call("conv2d", "T,T,T,[i],[i]", null, null, null, List.of(1L, 1L), List.of(1L, 1L)),
            LINE, List.of(torch.randn(1, 2, 3, 4), torch.randn(3, 2, 3, 3), torch.randn(3)), List.of(p(S2), p(R), p(R))));
        out.add(of("conv2d, height 2 on 4, kernel 5", call("conv2d", "T,T,T,[i],[i]", null, null, null, List.of(1L, 1L), List.of(2L, 2L)),
            LINE, List.of(torch.randn(1, 2, 2, 4), torch.randn(3, 2, 5, 5), torch.randn(3)), List.of(p(S2), p(R), p(R))));
        out.add(of("max_pool2d, batch 2 on 4", call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), LINE, torch.randn(2, 3, 4, 4), S0));
        out.add(of("avg_pool2d, height 3 on 4", call("avg_pool2d", "T,[i]", null, List.of(1L, 2L)), LINE, torch.randn(1, 2, 3, 4), S2));
        out.add(of("upsample_nearest2d, batch 2 on 4", call("upsample_nearest2d", "T,[i]", null, List.of(6L, 6L)), LINE,
            torch.randn(2, 3, 3, 3), S0));
        out.add(of("scaled_dot_product_attention, batch 2 on 4", call("scaled_dot_product_attention", "T,T,T", null, null, null), LINE,
            List.of(torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 5)), List.of(p(S0), p(S0), p(S0))));
        out.add(of("scaled_dot_product_attention, heads 3 on 4", call("scaled_dot_product_attention", "T,T,T", null, null, null), LINE,
            List.of(torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 5)), List.of(p(S1), p(S1), p(S1))));
        return out;
    }
}
