package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Comparison, logical and bitwise operators, {@code maskedFill}, {@code where} and boolean indexing of {@link DTensor}
 * against libtorch on the whole tensors: on 1-d and 2-d meshes with sharded, replicated and partial inputs, with
 * torch's type promotion (bool results, integers compared exactly with {@code long} scalars and in floating point with
 * {@code double} ones), and the placements they keep.
 */
@Timeout(300)
class CompareOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    /** 2^62 + 1: the nearest double is 2^62, so only an exact comparison tells it from its neighbours. */
    private static final long BIG = (1L << 62) + 1;

    /** The runtime under test: threads here, worker processes in the subclass. */
    DTorch runtime() {
        return dt;
    }

    /** Whether the runtime under test runs its devices in worker processes. */
    boolean processes() {
        return false;
    }

    /** The placements every comparison is tried with, on a [2] and a [2, 2] mesh: sharded, replicated and partial. */
    private List<Placement[]> placementsFor(int meshDims) {
        return meshDims == 1
            ? List.of(new Placement[] {Placement.shard(0)}, new Placement[] {Placement.shard(1)}, new Placement[] {R},
                new Placement[] {Placement.partial()})
            : List.of(new Placement[] {Placement.shard(0), Placement.shard(1)}, new Placement[] {R, Placement.shard(0)},
                new Placement[] {Placement.partial(), Placement.shard(1)}, new Placement[] {Placement.shard(1), R});
    }

    private List<DeviceMesh> meshes() {
        return List.of(runtime().initDeviceMesh(new int[] {2}), runtime().initDeviceMesh(new int[] {2, 2}));
    }

    /** {@code t} on {@code mesh} with {@code placements}; a partial placement is made from the replicated tensor. */
    DTensor distribute(Tensor t, DeviceMesh mesh, Placement... placements) {
        Placement[] whole = Arrays.stream(placements).map(p -> p.isPartial() ? R : p).toArray(Placement[]::new);
        DTensor made = runtime().tensor(t, mesh, whole);
        if (Arrays.equals(whole, placements)) {
            return made;
        }
        try (made) {
            return made.redistribute(placements);
        }
    }

    /** {@code got} (taken and closed) against {@code want} (closed): shape, dtype, and values, exactly unless floating. */
    static void assertSame(String what, Tensor want, DTensor got) {
        try (got; want; Tensor value = got.toTorch()) {
            assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(value.sizes().vec().get()), what);
            assertEquals(want.scalar_type().intern(), value.scalar_type().intern(), what);
            boolean same = torch.isFloatingType(want.scalar_type()) ? torch.allclose(value, want, 1e-5, 1e-6, true) : torch.equal(value, want);
            if (!same) {
                fail(what + ": values differ\n got  " + value + "\n want " + want);
            }
        }
    }

    static Tensor longs(long... values) {
        return torch.tensor(values);
    }

    @Test
    void shouldCompareTensorsAndNumbersLikeTorch() {
        Map<String, BiFunction<DTensor, DTensor, DTensor>> ours = new LinkedHashMap<>();
        ours.put("gt", DTensor::gt);
        ours.put("lt", DTensor::lt);
        ours.put("ge", DTensor::ge);
        ours.put("le", DTensor::le);
        ours.put("eq", DTensor::eq);
        ours.put("ne", DTensor::ne);
        Map<String, Function<DTensor, DTensor>> withNumbers = new LinkedHashMap<>();
        withNumbers.put("gt(0.25)", t -> t.gt(0.25));
        withNumbers.put("lt(1L)", t -> t.lt(1L));
        withNumbers.put("ge(0.5)", t -> t.ge(0.5));
        withNumbers.put("le(-0.25)", t -> t.le(-0.25));
        withNumbers.put("eq(1L)", t -> t.eq(1L));
        withNumbers.put("ne(0.0)", t -> t.ne(0.0));
        Map<String, Object> numbers = Map.of("gt(0.25)", 0.25, "lt(1L)", 1L, "ge(0.5)", 0.5, "le(-0.25)", -0.25, "eq(1L)", 1L, "ne(0.0)", 0.0);
        for (DeviceMesh mesh : meshes()) {
            for (Placement[] px : placementsFor(mesh.ndim())) {
                // Integers in floats, so that eq and ne meet equal values.
                try (Tensor r = torch.randint(-2, 3, new long[] {6, 4}); Tensor x = r.to(ScalarType.Float);
                     Tensor ry = torch.randint(-2, 3, new long[] {4}); Tensor y = ry.to(ScalarType.Float)) {
                    for (var e : ours.entrySet()) {
                        DTensor dx = distribute(x, mesh, px);
                        DTensor dy = distribute(y, mesh, mesh.ndim() == 1 ? new Placement[] {R} : new Placement[] {R, Placement.shard(0)});
                        assertSame(e.getKey() + " " + Arrays.toString(px) + " on " + mesh, CompareCalls.tensors(e.getKey()).call(List.of(x, y)).getFirst(),
                            e.getValue().apply(dx, dy));
                        dx.close();
                        dy.close();
                    }
                    for (var e : withNumbers.entrySet()) {
                        String name = e.getKey().substring(0, 2);
                        Object n = numbers.get(e.getKey());
                        Tensor want = (n instanceof Long l ? CompareCalls.scalar(name, l) : CompareCalls.scalar(name, (Double) n)).call(List.of(x)).getFirst();
                        try (DTensor dx = distribute(x, mesh, px)) {
                            assertSame(e.getKey() + " " + Arrays.toString(px) + " on " + mesh, want, e.getValue().apply(dx));
                        }
                    }
                }
            }
        }
    }

    @Test
    void shouldCompareInt64WithLongsExactlyAndWithDoublesInFloatingPoint() {
        DeviceMesh line = runtime().mesh(0, 1, 2, 3);
        try (Tensor x = longs(BIG, BIG - 1, BIG + 1, 0, 1, 2, 3, -BIG)) {
            DTensor dx = runtime().tensor(x, line, Placement.shard(0));
            assertSame("eq(BIG)", torch.eq(x, new Scalar(BIG)), dx.eq(BIG));
            assertSame("gt(BIG)", torch.gt(x, new Scalar(BIG)), dx.gt(BIG));
            assertSame("le(BIG)", torch.le(x, new Scalar(BIG)), dx.le(BIG));
            assertSame("ne(-BIG)", torch.ne(x, new Scalar(-BIG)), dx.ne(-BIG));
            // What a double would have made of BIG: every one of the three neighbours would have been equal.
            try (DTensor eqBig = dx.eq(BIG); Tensor v = eqBig.toTorch(); Tensor count = v.sum()) {
                assertEquals(1, count.item_long());
            }
            assertSame("gt(1.5)", torch.gt(x, new Scalar(1.5)), dx.gt(1.5));
            assertSame("bitwiseAnd(BIG)", torch.bitwise_and(x, new Scalar(BIG)), dx.bitwiseAnd(BIG));
            assertSame("bitwiseXor(BIG)", torch.bitwise_xor(x, new Scalar(BIG)), dx.bitwiseXor(BIG));
            try (DTensor mask = dx.lt(2L); Tensor m = mask.toTorch()) {
                assertSame("maskedFill(BIG)", x.masked_fill(m, new Scalar(BIG)), dx.maskedFill(mask, BIG));
                try (Tensor big = torch.full(new long[] {8}, new Scalar(-BIG), new org.bytedeco.pytorch.TensorOptions(ScalarType.Long))) {
                    assertSame("where(mask, x, -BIG)", torch.where(m, x, big), runtime().where(mask, dx, -BIG));
                }
            }
            dx.close();
        }
    }

    @Test
    void shouldPromoteLogicalAndBitwiseOperatorsAsTorchDoes() {
        DeviceMesh mesh = runtime().initDeviceMesh(new int[] {2, 2});
        try (Tensor u = torch.rand(new long[] {4, 6}); Tensor v = torch.rand(new long[] {4, 6});
             Tensor a = u.gt(new Scalar(0.5)); Tensor b = v.gt(new Scalar(0.3));
             Tensor i = torch.randint(0, 64, new long[] {4, 6}); Tensor j = torch.randint(0, 64, new long[] {6});
             Tensor i32 = j.to(ScalarType.Int)) {
            DTensor da = distribute(a, mesh, Placement.shard(0), Placement.shard(1));
            DTensor db = distribute(b, mesh, R, Placement.shard(1));
            DTensor di = distribute(i, mesh, Placement.shard(1), R);
            DTensor dj = distribute(i32, mesh, R, Placement.shard(0));
            DTensor df = distribute(u, mesh, Placement.partial(), Placement.shard(0));
            assertSame("bool & bool", torch.bitwise_and(a, b), da.bitwiseAnd(db));
            assertSame("bool | bool", torch.bitwise_or(a, b), da.bitwiseOr(db));
            assertSame("bool ^ bool", torch.bitwise_xor(a, b), da.bitwiseXor(db));
            assertSame("~bool", torch.bitwise_not(a), da.bitwiseNot());
            assertSame("int64 & int32", torch.bitwise_and(i, i32), di.bitwiseAnd(dj));
            assertSame("int64 | 5", torch.bitwise_or(i, new Scalar(5L)), di.bitwiseOr(5L));
            assertSame("~int64", torch.bitwise_not(i), di.bitwiseNot());
            assertSame("logical_and(float P, bool)", torch.logical_and(u, b), df.logicalAnd(db));
            assertSame("logical_or(int, bool)", torch.logical_or(i, a), di.logicalOr(da));
            assertSame("logical_xor", torch.logical_xor(a, b), da.logicalXor(db));
            assertSame("logical_not(float P)", torch.logical_not(u), df.logicalNot());
            for (DTensor t : List.of(da, db, di, dj, df)) {
                t.close();
            }
        }
    }

    @Test
    void shouldChooseBetweenBranchesWithWhereAndMaskedFill() {
        for (DeviceMesh mesh : meshes()) {
            for (Placement[] px : placementsFor(mesh.ndim())) {
                try (Tensor x = torch.randn(new long[] {6, 4}); Tensor y = torch.randn(new long[] {4}); Tensor c = x.gt(new Scalar(0.0));
                     Tensor xi = torch.randint(-5, 5, new long[] {6, 4})) {
                    DTensor dx = distribute(x, mesh, px);
                    DTensor dy = distribute(y, mesh, mesh.ndim() == 1 ? new Placement[] {Placement.shard(0)} : new Placement[] {R, Placement.shard(0)});
                    DTensor dc = dx.gt(0.0);
                    DTensor dxi = distribute(xi, mesh, px[0].isPartial() ? Arrays.copyOf(new Placement[] {R, R}, mesh.ndim()) : px);
                    String what = Arrays.toString(px) + " on " + mesh;
                    try (Tensor scaled = x.mul(new Scalar(0.1)); DTensor dscaled = dx.mul(0.1)) {
                        assertSame("where(x > 0, x, 0.1 x) " + what, torch.where(c, x, scaled), runtime().where(dc, dx, dscaled));
                    }
                    assertSame("where(c, x, y) " + what, torch.where(c, x, y), runtime().where(dc, dx, dy));
                    assertSame("where(c, x, 0.5) " + what, torch.where(c, x, new Scalar(0.5)), runtime().where(dc, dx, 0.5));
                    assertSame("where(c, 2.0, y) " + what, torch.where(c, new Scalar(2.0), y), runtime().where(dc, 2.0, dy));
                    // An int64 branch and a double: torch promotes to float32.
                    assertSame("where(c, xi, 0.5) " + what, torch.where(c, xi, new Scalar(0.5)), runtime().where(dc, dxi, 0.5));
                    assertSame("where(c, 7L, xi) " + what, torch.where(c, new Scalar(7L), xi), runtime().where(dc, 7L, dxi));
                    assertSame("where(c, 1L, 2L) " + what, torch.where(c, new Scalar(1L), new Scalar(2L)), runtime().where(dc, 1L, 2L));
                    assertSame("where(c, 1.0, 2.0) " + what, torch.where(c, new Scalar(1.0), new Scalar(2.0)), runtime().where(dc, 1.0, 2.0));
                    assertSame("masked_fill(c, -1.5) " + what, x.masked_fill(c, new Scalar(-1.5)), dx.maskedFill(dc, -1.5));
                    assertSame("int masked_fill(c, 9L) " + what, xi.masked_fill(c, new Scalar(9L)), dxi.maskedFill(dc, 9L));
                    for (DTensor t : List.of(dx, dy, dc, dxi)) {
                        t.close();
                    }
                }
            }
        }
    }

    @Test
    void shouldKeepShardsThroughComparisonsAndReducePartialValues() {
        DeviceMesh mesh = runtime().initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(new long[] {4, 6})) {
            DTensor dx = distribute(x, mesh, Placement.shard(1), Placement.shard(0));
            try (DTensor gt = dx.gt(0.0)) {
                assertEquals(List.of(Placement.shard(1), Placement.shard(0)), gt.placements());
                assertEquals(ScalarType.Bool, gt.dtype().intern());
            }
            DTensor partial = distribute(x, mesh, Placement.partial(), Placement.shard(1));
            // A comparison is not linear: the partial values are summed first (reduce-scattered over the rows, half an
            // all-reduce's traffic).
            try (DTensor gt = partial.gt(0.0)) {
                assertEquals(List.of(Placement.shard(0), Placement.shard(1)), gt.placements());
                assertSame("gt of a partial tensor", x.gt(new Scalar(0.0)), partial.gt(0.0));
            }
            dx.close();
            partial.close();
        }
    }

    /** torch's {@code x[mask]}, made of masked_select: the mask broadcast over x's trailing dimensions. */
    static Tensor indexByMask(Tensor x, Tensor mask) {
        int k = (int) mask.dim();
        long[] xs = x.sizes().vec().get();
        long[] view = new long[xs.length];
        Arrays.fill(view, 1);
        System.arraycopy(xs, 0, view, 0, k);
        long[] out = new long[xs.length - k + 1];
        out[0] = -1;
        System.arraycopy(xs, k, out, 1, xs.length - k);
        try (Tensor m = mask.reshape(view); Tensor expanded = m.expand(xs); Tensor selected = torch.masked_select(x, expanded)) {
            return selected.reshape(out);
        }
    }

    @Test
    void shouldIndexByMaskKeepingShardsOfDimensionsTheMaskDoesNotCover() {
        DeviceMesh line = runtime().initDeviceMesh(new int[] {2});
        try (Tensor x = torch.randn(new long[] {6, 5}); Tensor mask = x.select(1, 0).gt(new Scalar(0.0))) {
            // Every device selects the same rows of its own columns.
            DTensor dx = distribute(x, line, Placement.shard(1));
            for (Placement[] pm : List.of(new Placement[] {R}, new Placement[] {Placement.shard(0)})) {
                DTensor dm = distribute(mask, line, pm);
                DTensor rows = dx.indexByMask(dm);
                assertEquals(List.of(Placement.shard(1)), rows.placements(), "mask " + Arrays.toString(pm));
                assertSame("x[mask] S(1), mask " + Arrays.toString(pm), indexByMask(x, mask), rows);
                dm.close();
            }
            // Selecting commutes with summing partial values.
            DTensor partial = distribute(x, line, Placement.partial());
            try (DTensor dm = distribute(mask, line, R); DTensor rows = partial.indexByMask(dm)) {
                assertEquals(List.of(Placement.partial()), rows.placements());
                assertSame("x[mask] P(sum)", indexByMask(x, mask), partial.indexByMask(dm));
            }
            dx.close();
            partial.close();
        }
        DeviceMesh grid = runtime().initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(new long[] {4, 3, 6}); Tensor mask = torch.rand(new long[] {4, 3}).gt(new Scalar(0.4))) {
            DTensor dx = distribute(x, grid, R, Placement.shard(2));
            try (DTensor dm = distribute(mask, grid, Placement.shard(0), R); DTensor out = dx.indexByMask(dm)) {
                assertEquals(List.of(R, Placement.shard(1)), out.placements());
                assertSame("x[mask2d] [R, S(2)]", indexByMask(x, mask), dx.indexByMask(dm));
            }
            dx.close();
        }
    }

    @Test
    void shouldReplicateTheCoveredDimensionsWithOneWarning() {
        DeviceMesh grid = runtime().initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(new long[] {6, 4}); Tensor mask = torch.rand(new long[] {6}).gt(new Scalar(0.5))) {
            DTensor dx = distribute(x, grid, Placement.shard(0), Placement.shard(1));
            try (DTensor dm = distribute(mask, grid, Placement.shard(0), R); DTensor out = dx.indexByMask(dm)) {
                assertEquals(List.of(R, Placement.shard(1)), out.placements());
                assertTrue(FallbackWarnings.warned().contains(MaskIndexSpec.FALLBACK_NAME), FallbackWarnings.warned().toString());
                assertSame("x[mask] over a sharded dimension", indexByMask(x, mask), dx.indexByMask(dm));
            }
            dx.close();
        }
    }

    @Test
    void shouldIndexWithAMaskOfEveryDimension() {
        DeviceMesh line = runtime().initDeviceMesh(new int[] {4});
        try (Tensor x = torch.randn(new long[] {8, 5}); Tensor all = x.gt(new Scalar(0.0))) {
            DTensor dx = distribute(x, line, Placement.shard(0));
            try (DTensor dm = dx.gt(0.0)) {
                assertSame("x[x > 0]", indexByMask(x, all), dx.indexByMask(dm));
            }
            dx.close();
        }
    }

    @Test
    void shouldIndexWithAMaskWithoutTrueElements() {
        DeviceMesh line = runtime().initDeviceMesh(new int[] {4});
        try (Tensor x = torch.randn(new long[] {8, 5});
             Tensor none = torch.zeros(new long[] {8}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Bool))) {
            DTensor cols = distribute(x, line, Placement.shard(1));
            try (DTensor dm = distribute(none, line, R); DTensor out = cols.indexByMask(dm)) {
                assertEquals("[0, 5]", Arrays.toString(out.shape()));
                assertEquals(List.of(Placement.shard(1)), out.placements());
                assertSame("x[all false]", indexByMask(x, none), cols.indexByMask(dm));
            }
            cols.close();
        }
    }

    @Test
    void shouldRefuseABadMaskBeforeAnythingRuns() {
        DeviceMesh line = runtime().initDeviceMesh(new int[] {2});
        try (Tensor x = torch.randn(new long[] {6, 4}); Tensor wrong = torch.ones(new long[] {4}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Bool))) {
            DTensor dx = distribute(x, line, Placement.shard(0));
            DTensor dw = distribute(wrong, line, R);
            runtime().runtime().graph().history().drain();
            IllegalArgumentException shape = assertThrows(IllegalArgumentException.class, () -> dx.indexByMask(dw));
            assertEquals("index_by_mask: the shape of the mask [4] at index 0 does not match the shape of the indexed tensor [6, 4] at index 0",
                shape.getMessage());
            IllegalArgumentException dtype = assertThrows(IllegalArgumentException.class, () -> dx.indexByMask(dx));
            assertTrue(dtype.getMessage().contains("must be a bool tensor"), dtype.getMessage());
            assertEquals(List.of(), runtime().runtime().graph().history().drain().operators());
            dx.close();
            dw.close();
        }
    }
}
