package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The generic ATen operator ({@link AtenSpec}) and the strategy table ({@link StrategyTable}) against libtorch on whole
 * tensors: every element-wise operator and every reduction of the table on random shapes (broadcasting and uneven
 * shards included) and random placements on 1-, 2- and 2x2-device meshes, the placements each strategy gives, and the
 * fallback for operators in no family.
 */
@Timeout(300)
class GenericOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    /** The call {@code name} makes of values of the kinds {@code key} (tensor values are only placeholders). */
    static AtenCall call(String name, String key, Object... values) {
        return AtenCall.of(name, key, values);
    }

    /** Extra arguments of element-wise operators that are not unary or binary on tensors: key, values, input dtypes. */
    private record Special(String key, Object[] values, ScalarType[] dtypes) {
    }

    private static final ScalarType F = ScalarType.Float;
    private static final ScalarType B = ScalarType.Bool;
    private static final ScalarType L = ScalarType.Long;
    private static final Map<String, Special> SPECIAL = Map.ofEntries(
        Map.entry("clamp", new Special("T,f,f", new Object[] {null, 0.2, 0.7}, new ScalarType[] {F})),
        Map.entry("clip", new Special("T,f,f", new Object[] {null, 0.2, 0.7}, new ScalarType[] {F})),
        Map.entry("clamp_min", new Special("T,f", new Object[] {null, 0.3}, new ScalarType[] {F})),
        Map.entry("clamp_max", new Special("T,f", new Object[] {null, 0.3}, new ScalarType[] {F})),
        Map.entry("threshold", new Special("T,f,f", new Object[] {null, 0.5, -1.0}, new ScalarType[] {F})),
        Map.entry("masked_fill", new Special("T,T,f", new Object[] {null, null, -2.0}, new ScalarType[] {F, B})),
        Map.entry("where", new Special("T,T,T", new Object[] {null, null, null}, new ScalarType[] {B, F, F})),
        Map.entry("lerp", new Special("T,T,f", new Object[] {null, null, 0.3}, new ScalarType[] {F, F})),
        Map.entry("addcdiv", new Special("T,T,T", new Object[] {null, null, null}, new ScalarType[] {F, F, F})),
        Map.entry("addcmul", new Special("T,T,T", new Object[] {null, null, null}, new ScalarType[] {F, F, F})),
        Map.entry("bitwise_not", new Special("T", new Object[] {null}, new ScalarType[] {L})),
        Map.entry("bitwise_and", new Special("T,T", new Object[] {null, null}, new ScalarType[] {L, L})),
        Map.entry("bitwise_or", new Special("T,T", new Object[] {null, null}, new ScalarType[] {L, L})),
        Map.entry("bitwise_xor", new Special("T,T", new Object[] {null, null}, new ScalarType[] {L, L})),
        Map.entry("bitwise_left_shift", new Special("T,T", new Object[] {null, null}, new ScalarType[] {L, L})),
        Map.entry("bitwise_right_shift", new Special("T,T", new Object[] {null, null}, new ScalarType[] {L, L})));

    private static final Random RANDOM = new Random(12);
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};

    @Test
    void shouldRunEveryPointwiseOperatorOfTheTableLikeTorch() {
        walkPointwise(dt);
    }

    @Test
    void shouldRunEveryReductionOfTheTableLikeTorch() {
        walkReductions(dt);
    }

    /** Every pointwise operator of the table against torch on {@code runtime}, over every mesh of {@link #MESHES}. */
    static void walkPointwise(DTorch runtime) {
        walkPointwise(runtime, 1);
    }

    /** Every {@code stride}-th pointwise operator of the table in name order (1: all of them), on every mesh. */
    static void walkPointwise(DTorch runtime, int stride) {
        List<String> names = new ArrayList<>(StrategyTable.pointwiseNames());
        names.sort(null);
        int checked = 0;
        for (int i = 0; i < names.size(); i += stride) {
            String name = names.get(i);
            Special special = SPECIAL.get(name);
            AtenCall c;
            ScalarType[] dtypes;
            if (special != null) {
                c = call(name, special.key(), special.values());
                dtypes = special.dtypes();
            } else if (resolves(name, "T") && !List.of("add", "sub", "mul", "div", "pow", "rsub", "true_divide", "floor_divide").contains(name)) {
                c = call(name, "T", (Object) null);
                dtypes = new ScalarType[] {F};
            } else {
                c = call(name, "T,T", null, null);
                dtypes = new ScalarType[] {F, F};
            }
            assertEquals("pointwise", StrategyTable.of(c).family(), name);
            for (int[] mesh : MESHES) {
                checkAgainstTorch(runtime, c, dtypes, mesh, true);
                checked++;
            }
        }
        assertTrue(checked >= 4 * 100 / stride, "walked " + checked);
    }

    /** Every reduction of the table against torch on {@code runtime}, over every mesh of {@link #MESHES}. */
    static void walkReductions(DTorch runtime) {
        for (String name : StrategyTable.reductionNames().stream().sorted().toList()) {
            for (int[] mesh : MESHES) {
                int d = RANDOM.nextInt(3);
                boolean keep = RANDOM.nextBoolean();
                List<AtenCall> calls = switch (name) {
                    case "sum", "nansum", "mean", "nanmean", "amax", "amin", "logsumexp", "var", "std", "linalg_vector_norm" -> List.of(
                        call(name, "T|dim=[i]|keepdim=b", null, List.of((long) d), keep),
                        call(name, "T|dim=[i]|keepdim=b", null, List.of((long) d, (long) (d + 1) % 3), keep));
                    case "norm" -> List.of(call(name, "T,f,[i]|keepdim=b", null, 2.0, List.of((long) d), keep));
                    case "count_nonzero" -> List.of(call(name, "T,[i]", null, List.of((long) d)));
                    case "prod", "all", "any", "max", "min" -> List.of(call(name, "T,i|keepdim=b", null, (long) d, keep), call(name, "T", (Object) null));
                    case "argmax", "argmin" -> List.of(call(name, "T|dim=i|keepdim=b", null, (long) d, keep));
                    default -> throw new AssertionError("no case for reduction " + name);
                };
                for (AtenCall c : calls) {
                    assertEquals("reduction", StrategyTable.of(c).family(), c.toString());
                    ScalarType dtype = name.equals("all") || name.equals("any") ? B : F;
                    checkAgainstTorch(runtime, c, new ScalarType[] {dtype}, mesh, false);
                }
            }
        }
    }

    private static boolean resolves(String name, String key) {
        return AtenOps.bestPlan(AtenOps.overloads(name), ArgKind.Signature.parse(key)) != null;
    }

    /**
     * Random shapes (the first input 3-D, the others broadcast against it) and placements; the result of {@code c} on
     * {@code runtime} against torch. {@link GenericOpsInProcessesTest} uses it with worker processes.
     */
    static void checkAgainstTorch(DTorch runtime, AtenCall c, ScalarType[] dtypes, int[] meshShape, boolean pointwise) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        long[] full = {4 + RANDOM.nextInt(4), 4 + RANDOM.nextInt(3), 5 + RANDOM.nextInt(3)};
        List<Tensor> locals = new ArrayList<>();
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (int i = 0; i < dtypes.length; i++) {
                long[] shape = i == 0 ? full : broadcastable(full);
                Tensor t = random(shape, dtypes[i]);
                locals.add(t);
                inputs.add(distribute(runtime, t, mesh, pointwise && dtypes[i] != B));
            }
            assertLikeTorch(runtime, c, locals, inputs, meshShape);
        } finally {
            inputs.forEach(DTensor::close);
            locals.forEach(Tensor::close);
        }
    }

    /**
     * {@code c} on the distributed {@code inputs} through {@code runtime} against {@code c} on the whole {@code locals}: same
     * shapes and dtypes, values equal for integers and bools, close for floating point; the first output's placements.
     */
    static List<Placement> assertLikeTorch(DTorch runtime, AtenCall c, List<Tensor> locals, List<DTensor> inputs, int[] meshShape) {
        List<DTensor> out = runtime.aten(c, inputs.toArray(DTensor[]::new));
        List<Tensor> expected = c.call(locals);
        List<Placement> placements = out.getFirst().placements();
        for (int r = 0; r < out.size(); r++) {
            try (DTensor o = out.get(r); Tensor got = o.toTorch(); Tensor want = expected.get(r)) {
                String what = c + " on " + inputs.stream().map(DTensor::placements).toList() + " over " + Arrays.toString(meshShape)
                    + " -> " + o.placements();
                assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(got.sizes().vec().get()), what);
                assertEquals(want.scalar_type().intern(), got.scalar_type().intern(), what);
                boolean exact = !torch.isFloatingType(want.scalar_type());
                boolean same = exact ? torch.equal(got, want) : torch.allclose(got, want, 1e-4, 1e-5, true);
                if (!same) {
                    fail(what + ": values differ\n got  " + got + "\n want " + want);
                }
            }
        }
        return placements;
    }

    private static long[] broadcastable(long[] full) {
        int drop = RANDOM.nextInt(2);
        long[] shape = Arrays.copyOfRange(full, drop, full.length);
        for (int k = 0; k < shape.length; k++) {
            if (RANDOM.nextInt(4) == 0) {
                shape[k] = 1;
            }
        }
        return shape;
    }

    static Tensor random(long[] shape, ScalarType dtype) {
        if (dtype == B) {
            try (Tensor u = torch.rand(shape); org.bytedeco.pytorch.Scalar half = new org.bytedeco.pytorch.Scalar(0.5)) {
                return u.gt(half);
            }
        }
        if (dtype == L) {
            return torch.randint(0, 16, shape);
        }
        try (Tensor u = torch.rand(shape); org.bytedeco.pytorch.Scalar half = new org.bytedeco.pytorch.Scalar(0.5)) {
            return u.add(half);
        }
    }

    /** {@code t} on {@code mesh} with a random placement per mesh dimension: R, S(d) of a long enough d, or (if allowed) P(sum). */
    static DTensor distribute(DTorch runtime, Tensor t, DeviceMesh mesh, boolean partialAllowed) {
        return distribute(runtime, t, mesh, partialAllowed, RANDOM);
    }

    /** As {@link #distribute(DTorch, Tensor, DeviceMesh, boolean)}, drawing from {@code random} (for other families' walks). */
    static DTensor distribute(DTorch runtime, Tensor t, DeviceMesh mesh, boolean partialAllowed, Random random) {
        long[] shape = t.sizes().vec().get();
        Placement[] ps = new Placement[mesh.ndim()];
        boolean partial = false;
        for (int m = 0; m < ps.length; m++) {
            int choice = random.nextInt(partialAllowed ? 4 : 3);
            int d = shape.length == 0 ? -1 : random.nextInt(shape.length);
            if (choice == 3) {
                ps[m] = Placement.partial();
                partial = true;
            } else if (choice > 0 && d >= 0 && shape[d] >= mesh.shape()[m] * 2L) {
                ps[m] = Placement.shard(d);
            } else {
                ps[m] = R;
            }
        }
        if (!partial) {
            return runtime.tensor(t, mesh, ps);
        }
        Placement[] whole = ps.clone();
        for (int m = 0; m < whole.length; m++) {
            whole[m] = whole[m].isPartial() ? R : whole[m];
        }
        try (DTensor d = runtime.tensor(t, mesh, whole)) {
            return d.redistribute(ps);
        }
    }

    @Test
    void shouldKeepShardsAndLinearPartialsAndReplicateBroadcastInputs() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = torch.rand(10, 6); Tensor b = torch.rand(6);
             DTensor da = dt.tensor(a, mesh, Placement.shard(0)); DTensor db = dt.tensor(b, mesh, Placement.shard(0))) {
            // b is broadcast along the sharded result dimension 0 and sharded along 1: it is gathered, a stays.
            DTensor sum = dt.aten(call("add", "T,T", null, null), da, db).getFirst();
            assertEquals(List.of(Placement.shard(0)), sum.placements());
            try (DTensor p = da.redistribute(Placement.partial()); DTensor q = da.redistribute(Placement.partial())) {
                assertEquals(List.of(Placement.partial()), dt.aten(call("add", "T,T", null, null), p, q).getFirst().placements());
                assertEquals(List.of(Placement.partial()), dt.aten(call("mul", "T,f", null, 3.0), p).getFirst().placements());
                // Not linear: the partial sums are reduced first, scattered over the rows (a reduce-scatter moves half
                // of what an all-reduce moves).
                assertEquals(List.of(Placement.shard(0)), dt.aten(call("relu", "T", (Object) null), p).getFirst().placements(), "relu is not linear");
                assertEquals(List.of(Placement.shard(0)), dt.aten(call("add", "T,f", null, 1.0), p).getFirst().placements(),
                    "adding a number is not linear");
                try (Tensor got = dt.aten(call("add", "T,f", null, 1.0), p).getFirst().toTorch();
                     org.bytedeco.pytorch.Scalar one = new org.bytedeco.pytorch.Scalar(1.0);
                     Tensor want = a.add(one)) {
                    assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false));
                }
            }
            assertEquals(List.of(Placement.partial()), dt.aten(call("sum", "T|dim=[i]", null, List.of(0L)), da).getFirst().placements());
            assertEquals(List.of(Placement.partial(org.dtorch.core.communication.ReduceOpType.MAX)),
                dt.aten(call("amax", "T|dim=[i]", null, List.of(0L)), da).getFirst().placements());
            assertEquals(List.of(Placement.shard(0)), dt.aten(call("sum", "T|dim=[i]", null, List.of(1L)), da).getFirst().placements());
            assertEquals(List.of(Placement.shard(0)), dt.aten(call("mean", "T|dim=[i]", null, List.of(0L)), da).getFirst().placements(),
                "mean over a sharded dimension moves the shards to the kept dimension first (an all-to-all)");
            try (Tensor got = dt.aten(call("mean", "T|dim=[i]", null, List.of(0L)), da).getFirst().toTorch(); Tensor want = a.mean(new long[] {0})) {
                assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false));
            }
        }
    }

    @Test
    void shouldRefuseInputPlacementsTheStrategyDoesNotTakeListingTheLegalOnes() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        try (Tensor a = torch.rand(4, 6); DTensor da = dt.tensor(a, mesh, Placement.shard(0)); DTensor db = dt.tensor(a, mesh, Placement.shard(1))) {
            ShardingException e = Strict.refuses(dt, ShardingException.class, () -> dt.apply(new AtenSpec(call("add", "T,T", null, null)), da, db));
            assertTrue(e.getMessage().contains("pointwise") && e.getMessage().contains("R for all inputs"), e.getMessage());
            // An in-place operator writes each device's shard and returns the tensor it wrote.
            assertSame(da, dt.aten(call("relu_", "T", (Object) null), da).getFirst());
            assertEquals(List.of(Placement.shard(0)), da.placements());
            try (Tensor got = da.toTorch(); Tensor want = a.relu()) {
                assertTrue(torch.equal(got, want));
            }
            assertThrows(UnsupportedOperationException.class, () -> dt.aten(call("dropout", "T,f,b", null, 0.5, true), da));
            IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> dt.aten(call("add", "T,T", null, null), da, dt.tensor(torch.rand(5), mesh, R)));
            assertTrue(bad.getMessage().contains("aten::add.Tensor"), bad.getMessage());
        }
    }

    @Test
    void shouldRunAnOperatorWithoutStrategyOnReplicatedInputsAndWarnOnce() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor a = torch.rand(6, 5); DTensor da = dt.tensor(a, mesh, Placement.shard(0), Placement.shard(1))) {
            AtenCall tril = call("tril", "T,i", null, 0L);
            assertEquals("replicate", StrategyTable.of(tril).family());
            try (DTensor out = dt.aten(tril, da).getFirst(); Tensor got = out.toTorch(); Tensor want = a.tril(0L)) {
                assertEquals(List.of(R, R), out.placements());
                assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false));
            }
            assertTrue(FallbackWarnings.warned().contains("aten::tril"));
            assertTrue(!FallbackWarnings.warnOnce("aten::tril", "again"), "warned once only");
        }
    }
}
