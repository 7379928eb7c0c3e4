package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The view family ({@link ViewStrategy}) against libtorch on whole tensors: every operator of the family on random
 * shapes (uneven shards included) and random placements (partial sums included) over 1-, 2-, 4- and 2x2-device meshes,
 * and the placements the strategy gives: shards kept where a dimension survives, gathered where it does not.
 */
@Timeout(300)
class ViewOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement P = Placement.partial();
    private static final ScalarType F = ScalarType.Float;
    private static final ScalarType L = ScalarType.Long;
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};
    private static final Random RANDOM = new Random(21);

    /**
     * One call of the walk: the operator on inputs of these shapes and dtypes. A {@code Float} input holds values in
     * [0.5, 1.5), a {@code Long} one values in [0, 16); input {@code index} (if not -1) is an index of two distinct values
     * below {@code bound}.
     */
    private record Case(AtenCall call, long[][] shapes, ScalarType[] dtypes, int index, long bound) {
        static Case of(AtenCall call, ScalarType dtype, long... shape) {
            return new Case(call, new long[][] {shape}, new ScalarType[] {dtype}, -1, 0);
        }
    }

    @Test
    void shouldRunEveryViewOperatorOfTheTableLikeTorch() {
        walk(dt, MESHES);
    }

    /** Every operator of the view family against torch on {@code runtime}, over every mesh of {@code meshes}. */
    static void walk(DTorch runtime, int[][] meshes) {
        int checked = 0;
        for (String name : new TreeSet<>(ViewStrategy.NAMES)) {
            for (int[] mesh : meshes) {
                List<Case> cases = cases(name);
                assertTrue(!cases.isEmpty(), name);
                for (Case c : cases) {
                    assertEquals("view", StrategyTable.of(c.call()).family(), c.call().toString());
                    check(runtime, c, mesh);
                    checked++;
                }
            }
        }
        assertTrue(checked >= meshes.length * ViewStrategy.NAMES.size(), "walked " + checked);
    }

    private static long size() {
        return 2 + RANDOM.nextInt(8);
    }

    /** Random calls of {@code name} with the shapes they run on. */
    private static List<Case> cases(String name) {
        long a = size();
        long b = size();
        long c = size();
        ScalarType t = RANDOM.nextBoolean() ? F : L;
        int d = RANDOM.nextInt(3);
        long[] s = {a, b, c};
        return switch (name) {
            case "reshape" -> List.of(Case.of(call(name, "T,[i]", null, List.of(a * b, c)), t, s),
                Case.of(call(name, "T,[i]", null, List.of(c, a * b)), t, s), Case.of(call(name, "T,[i]", null, List.of(-1L)), t, s),
                Case.of(call(name, "T,[i]", null, List.of(2L, -1L)), t, 2 * a, b, c));
            case "view" -> List.of(Case.of(call(name, "T,[i]", null, List.of(a, b * c)), t, s));
            case "_unsafe_view" -> List.of(Case.of(call(name, "T,[i]", null, List.of(a * b * c)), t, s));
            case "flatten" -> List.of(Case.of(call(name, "T,i,i", null, 0L, 1L), t, s), Case.of(call(name, "T,i,i", null, 1L, -1L), t, s));
            case "unflatten" -> List.of(Case.of(call(name, "T,i,[i]", null, 0L, List.of(2L, a)), t, 2 * a, b, c),
                Case.of(call(name, "T,i,[i]", null, 2L, List.of(c, 1L)), t, s));
            case "squeeze" -> List.of(Case.of(call(name, "T", (Object) null), t, a, 1, c), Case.of(call(name, "T,i", null, 1L), t, a, 1, c),
                Case.of(call(name, "T,i", null, 0L), t, s));
            case "unsqueeze" -> List.of(Case.of(call(name, "T,i", null, (long) d), t, s), Case.of(call(name, "T,i", null, -1L), t, s));
            case "expand" -> List.of(Case.of(call(name, "T,[i]", null, List.of(2L, a, b, c)), t, a, 1, c),
                Case.of(call(name, "T,[i]", null, List.of(-1L, b, -1L)), t, a, 1, c));
            case "permute" -> List.of(Case.of(call(name, "T,[i]", null, List.of(2L, 0L, 1L)), t, s));
            case "transpose" -> List.of(Case.of(call(name, "T,i,i", null, 0L, 2L), t, s), Case.of(call(name, "T,i,i", null, -1L, 1L), t, s));
            case "swapaxes", "swapdims" -> List.of(Case.of(call(name, "T,i,i", null, (long) d, (long) (d + 1) % 3), t, s));
            case "t" -> List.of(Case.of(call(name, "T", (Object) null), t, a, b));
            case "movedim", "moveaxis" -> List.of(Case.of(call(name, "T,i,i", null, 0L, 2L), t, s),
                Case.of(call(name, "T,[i],[i]", null, List.of(0L, 1L), List.of(2L, 0L)), t, s));
            case "select" -> List.of(Case.of(call(name, "T,i,i", null, (long) d, -1L), t, s),
                Case.of(call(name, "T,i,i", null, (long) d, (long) RANDOM.nextInt((int) s[d])), t, s));
            case "narrow" -> List.of(Case.of(call(name, "T,i,i,i", null, (long) d, 1L, s[d] - 1), t, s));
            case "slice" -> List.of(Case.of(call(name, "T,i,i,i,i", null, (long) d, 1L, s[d], 2L), t, s),
                Case.of(call(name, "T,i,n,i", null, (long) d, null, -1L), t, s), Case.of(call(name, "T,i", null, (long) d), t, s));
            case "constant_pad_nd" -> List.of(Case.of(call(name, "T,[i]", null, List.of(1L, 2L)), t, s),
                Case.of(call(name, "T,[i],f", null, List.of(0L, 0L, 1L, 1L), 1.5), F, s));
            case "pad" -> List.of(Case.of(call(name, "T,[i]", null, List.of(0L, 0L, 0L, 0L, 2L, 0L)), t, s),
                Case.of(call(name, "T,[i],s,f", null, List.of(1L, 1L), "constant", 0.0), F, s));
            case "repeat" -> List.of(Case.of(call(name, "T,[i]", null, List.of(1L, 2L, 1L)), t, s),
                Case.of(call(name, "T,[i]", null, List.of(2L, 1L, 1L, 1L)), t, s));
            case "repeat_interleave" -> List.of(Case.of(call(name, "T,i|dim=i", null, 2L, (long) d), t, s),
                Case.of(call(name, "T,i", null, 2L), t, s));
            case "flip" -> List.of(Case.of(call(name, "T,[i]", null, List.of((long) d)), t, s));
            case "roll" -> List.of(Case.of(call(name, "T,[i],[i]", null, List.of(2L), List.of((long) d)), t, s),
                Case.of(call(name, "T,i", null, 3L), t, s));
            case "index_select" -> List.of(new Case(call(name, "T,i,T", null, (long) d, null), new long[][] {s, {2}}, new ScalarType[] {t, L}, 1, s[d]));
            case "slice_scatter" -> {
                long[] src = s.clone();
                src[d] = (s[d] - 1 + 1) / 2; // elements 1, 3, ... below s[d]
                yield List.of(new Case(call(name, "T,T,i,i,i,i", null, null, (long) d, 1L, s[d], 2L), new long[][] {s, src},
                    new ScalarType[] {t, t}, -1, 0));
            }
            case "select_scatter" -> {
                long[] src = new long[2];
                for (int k = 0, j = 0; k < 3; k++) {
                    if (k != d) {
                        src[j++] = s[k];
                    }
                }
                yield List.of(new Case(call(name, "T,T,i,i", null, null, (long) d, 1L), new long[][] {s, src}, new ScalarType[] {t, t}, -1, 0));
            }
            case "index_copy" -> { // distinct indices: a repeated one would be written in no defined order
                long[] src = s.clone();
                src[d] = 2;
                yield List.of(new Case(call(name, "T,i,T,T", null, (long) d, null, null), new long[][] {s, {2}, src},
                    new ScalarType[] {t, L, t}, 1, s[d]));
            }
            case "fill" -> List.of(Case.of(call(name, "T,f", null, 2.5), F, s), Case.of(call(name, "T,i", null, 0L), t, s));
            case "zero", "alias" -> List.of(Case.of(call(name, "T", (Object) null), t, s));
            default -> throw new AssertionError("no case for view " + name);
        };
    }

    /** {@code c} on random inputs with random placements over {@code meshShape}, against {@code c} on the whole tensors. */
    private static void check(DTorch runtime, Case c, int[] meshShape) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        List<Tensor> locals = new ArrayList<>();
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (int i = 0; i < c.shapes().length; i++) {
                Tensor t;
                if (i == c.index()) {
                    try (Tensor order = torch.randperm(c.bound())) {
                        t = order.narrow(0, 0, 2).clone();
                    }
                } else {
                    t = c.dtypes()[i] == L ? torch.randint(0, 16, c.shapes()[i]) : random(c.shapes()[i]);
                }
                locals.add(t);
                inputs.add(distribute(runtime, t, mesh, i != c.index()));
            }
            GenericOpsTest.assertLikeTorch(runtime, c.call(), locals, inputs, meshShape);
        } finally {
            inputs.forEach(DTensor::close);
            locals.forEach(Tensor::close);
        }
    }

    private static Tensor random(long[] shape) {
        try (Tensor u = torch.rand(shape); Scalar half = new Scalar(0.5)) {
            return u.add(half);
        }
    }

    /**
     * {@code t} with a random placement per mesh dimension: R, S(d) where every device still gets an element of d (uneven
     * shards included), or P(sum).
     */
    private static DTensor distribute(DTorch runtime, Tensor t, DeviceMesh mesh, boolean partialAllowed) {
        long[] shape = t.sizes().vec().get();
        Placement[] ps = new Placement[mesh.ndim()];
        Placement[] whole = new Placement[mesh.ndim()];
        long[] ways = new long[shape.length];
        Arrays.fill(ways, 1);
        for (int m = 0; m < ps.length; m++) {
            int choice = RANDOM.nextInt(partialAllowed ? 4 : 3);
            int d = RANDOM.nextInt(shape.length);
            boolean shard = choice == 1 || choice == 2;
            if (shard && shape[d] >= ways[d] * mesh.shape()[m]) {
                ways[d] *= mesh.shape()[m];
            } else {
                shard = false;
            }
            ps[m] = choice == 3 ? P : shard ? Placement.shard(d) : R;
            whole[m] = ps[m].isPartial() ? R : ps[m];
        }
        try (DTensor d = runtime.tensor(t, mesh, whole)) {
            return d.redistribute(ps);
        }
    }

    /** The placements {@code call} gives {@code t} placed as {@code in} on {@code meshShape}, checked against torch. */
    private static List<Placement> placementsOf(AtenCall call, long[] shape, int[] meshShape, Placement... in) {
        DeviceMesh mesh = dt.initDeviceMesh(meshShape);
        try (Tensor t = random(shape); DTensor whole = dt.tensor(t, mesh, Arrays.stream(in).map(p -> p.isPartial() ? R : p).toArray(Placement[]::new));
             DTensor x = whole.redistribute(in); DTensor out = dt.aten(call, x).getFirst(); Tensor got = out.toTorch();
             Tensor want = call.call(List.of(t)).getFirst()) {
            assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false), call + ": got " + got + " want " + want);
            return out.placements();
        }
    }

    @Test
    void shouldKeepAShardOnTheOutermostFactorOfAnEvenMergeOrSplitAndGatherOtherwise() {
        AtenCall flat = call("reshape", "T,[i]", null, List.of(-1L));
        assertEquals(List.of(Placement.shard(0)), placementsOf(flat, new long[] {8, 6}, new int[] {2}, Placement.shard(0)));
        assertEquals(List.of(R), placementsOf(flat, new long[] {5, 6}, new int[] {2}, Placement.shard(0)), "uneven shards of 5 rows");
        assertEquals(List.of(R), placementsOf(flat, new long[] {8, 6}, new int[] {2}, Placement.shard(1)), "an inner factor");
        assertEquals(List.of(Placement.shard(0)), placementsOf(call("reshape", "T,[i]", null, List.of(6L, 8L)), new long[] {8, 6},
            new int[] {2}, Placement.shard(0)), "8 rows of 6 and 6 rows of 8 split in halves alike");
        assertEquals(List.of(Placement.shard(0), Placement.shard(0)), placementsOf(flat, new long[] {8, 6}, new int[] {2, 2},
            Placement.shard(0), Placement.shard(0)));
        assertEquals(List.of(Placement.shard(2)), placementsOf(call("reshape", "T,[i]", null, List.of(3L, 2L, 7L)), new long[] {6, 7},
            new int[] {4}, Placement.shard(1)), "a dimension kept whole keeps uneven shards");
        assertEquals(List.of(Placement.shard(0)), placementsOf(call("squeeze", "T", (Object) null), new long[] {1, 6, 1}, new int[] {4},
            Placement.shard(1)));
    }

    @Test
    void shouldMoveShardsWithTheirDimensionAndGatherSlicedOnes() {
        long[] shape = {4, 6, 5};
        AtenCall permute = call("permute", "T,[i]", null, List.of(2L, 0L, 1L));
        assertEquals(List.of(Placement.shard(0), Placement.shard(2)), placementsOf(permute, shape, new int[] {2, 2},
            Placement.shard(2), Placement.shard(1)));
        assertEquals(List.of(R), placementsOf(call("select", "T,i,i", null, 0L, 1L), shape, new int[] {2}, Placement.shard(0)));
        assertEquals(List.of(Placement.shard(1)), placementsOf(call("select", "T,i,i", null, 1L, 1L), shape, new int[] {2}, Placement.shard(2)));
        assertEquals(List.of(R), placementsOf(call("narrow", "T,i,i,i", null, 1L, 1L, 3L), shape, new int[] {4}, Placement.shard(1)));
        assertEquals(List.of(Placement.shard(1)), placementsOf(call("slice", "T,i", null, 1L), shape, new int[] {4}, Placement.shard(1)),
            "a slice of the whole dimension keeps its shards");
        assertEquals(List.of(Placement.shard(2)), placementsOf(call("repeat", "T,[i]", null, List.of(2L, 2L, 1L, 1L)), shape,
            new int[] {2}, Placement.shard(1)));
    }

    @Test
    void shouldPassPartialSumsThroughViewsButNotThroughPaddingByOtherThanZero() {
        long[] shape = {4, 6};
        assertEquals(List.of(P), placementsOf(call("transpose", "T,i,i", null, 0L, 1L), shape, new int[] {2}, P));
        assertEquals(List.of(P), placementsOf(call("reshape", "T,[i]", null, List.of(3L, 8L)), shape, new int[] {2}, P));
        assertEquals(List.of(P), placementsOf(call("constant_pad_nd", "T,[i]", null, List.of(1L, 1L)), shape, new int[] {2}, P));
        assertEquals(List.of(R), placementsOf(call("constant_pad_nd", "T,[i],f", null, List.of(1L, 1L), 1.0), shape, new int[] {2}, P));
        assertEquals(List.of(R), placementsOf(call("fill", "T,f", null, 1.0), shape, new int[] {2}, P));
        assertEquals(List.of(P), placementsOf(call("fill", "T,b", null, false), shape, new int[] {2}, P));
    }

    @Test
    void shouldRefuseInputsThatNeedGatheringListingTheLegalPlacements() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        try (Tensor a = torch.rand(5, 6); DTensor da = dt.tensor(a, mesh, Placement.shard(0))) {
            ShardingException e = Strict.refuses(dt, ShardingException.class,
                () -> dt.apply(new AtenSpec(call("reshape", "T,[i]", null, List.of(-1L))), da));
            assertTrue(e.getMessage().contains("view") && e.getMessage().contains("outermost factor"), e.getMessage());
        }
    }
}
