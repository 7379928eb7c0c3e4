package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
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
 * The matrix products ({@link MatmulStrategy}) against libtorch on whole tensors: every operator of the family on random
 * shapes (uneven shards, broadcast batch dimensions, 1-D operands) and random placements (partial sums included) over
 * 1-, 2-, 4- and 2x2-device meshes, and the placements the strategy chooses.
 */
@Timeout(300)
class MatmulOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement P = Placement.partial();
    private static final ScalarType F = ScalarType.Float;
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};
    private static final Random RANDOM = new Random(31);

    /** One random case of an operator: its call and its inputs' shapes. */
    private record Case(AtenCall call, long[]... shapes) {
    }

    private static long n() {
        return 3 + RANDOM.nextInt(6);
    }

    /** A random case of {@code name}, of the family's shapes. */
    private static Case randomCase(String name) {
        long m = n();
        long k = n();
        long q = n();
        long b = n();
        return switch (name) {
            case "mm" -> new Case(call(name, "T,T", null, null), new long[] {m, k}, new long[] {k, q});
            case "bmm" -> new Case(call(name, "T,T", null, null), new long[] {b, m, k}, new long[] {b, k, q});
            case "dot" -> new Case(call(name, "T,T", null, null), new long[] {k}, new long[] {k});
            case "mv" -> new Case(call(name, "T,T", null, null), new long[] {m, k}, new long[] {k});
            case "outer", "ger" -> new Case(call(name, "T,T", null, null), new long[] {m}, new long[] {q});
            case "addmm" -> new Case(call(name, "T,T,T|beta=f|alpha=f", null, null, null, 0.5, 2.0),
                pick(new long[] {m, q}, new long[] {q}, new long[] {1, q}), new long[] {m, k}, new long[] {k, q});
            case "baddbmm" -> new Case(call(name, "T,T,T|beta=f|alpha=f", null, null, null, 0.5, 2.0),
                pick(new long[] {b, m, q}, new long[] {m, q}, new long[] {b, 1, q}), new long[] {b, m, k}, new long[] {b, k, q});
            case "addmv" -> new Case(call(name, "T,T,T", null, null, null), pick(new long[] {m}, new long[] {1}), new long[] {m, k},
                new long[] {k});
            case "linear" -> {
                long[] x = pick(new long[] {k}, new long[] {m, k}, new long[] {b, m, k});
                long[] w = pick(new long[] {q, k}, new long[] {q, k}, new long[] {k});
                yield RANDOM.nextBoolean() || w.length == 1 ? new Case(call(name, "T,T", null, null), x, w)
                    : new Case(call(name, "T,T,T", null, null, null), x, new long[] {q, k}, pick(new long[] {q}, new long[] {1}));
            }
            case "matmul" -> {
                long[][] pair = pick(new long[][][] {
                    {{k}, {k}}, {{m, k}, {k}}, {{k}, {k, q}}, {{m, k}, {k, q}}, {{b, m, k}, {k, q}}, {{m, k}, {b, k, q}},
                    {{b, m, k}, {1, k, q}}, {{2, 1, m, k}, {b, k, q}}, {{b, k}, {2, b, k, q}}});
                yield new Case(call(name, "T,T", null, null), pair);
            }
            case "einsum" -> pick(einsumCases().toArray(Case[]::new));
            default -> throw new AssertionError("no case for " + name);
        };
    }

    /**
     * One case of each einsum form: products, batches, a row-wise dot, an outer product, a diagonal, ellipses (implicit
     * and explicit output, broadcast), a transposed sum, three operands.
     */
    private static List<Case> einsumCases() {
        long m = n();
        long k = n();
        long q = n();
        long b = n();
        Object[][] forms = {
            {"ij,jk->ik", new long[][] {{m, k}, {k, q}}}, {"bij,bjk->bik", new long[][] {{b, m, k}, {b, k, q}}},
            {"ij,ij->i", new long[][] {{m, k}, {m, k}}}, {"i,j->ij", new long[][] {{m}, {q}}}, {"ii->i", new long[][] {{m, m}}},
            {"...ij,jk", new long[][] {{2, b, m, k}, {k, q}}}, {"...ij,...jk->...ik", new long[][] {{b, 1, m, k}, {2, k, q}}},
            {"ijk->kj", new long[][] {{b, m, k}}}, {"ij,jk,kl->il", new long[][] {{m, k}, {k, q}, {q, b}}}};
        List<Case> out = new ArrayList<>();
        for (Object[] form : forms) {
            long[][] shapes = (long[][]) form[1];
            out.add(new Case(call("einsum", "s,[T]", form[0], Collections.nCopies(shapes.length, null)), shapes));
        }
        return out;
    }

    @Test
    void shouldRunEveryEinsumFormLikeTorch() {
        for (int[] mesh : MESHES) {
            for (Case c : einsumCases()) {
                checkAgainstTorch(dt, c, F, mesh);
            }
        }
    }

    @SafeVarargs
    private static <T> T pick(T... choices) {
        return choices[RANDOM.nextInt(choices.length)];
    }

    @Test
    void shouldRunEveryMatrixProductOfTheTableLikeTorch() {
        walk(dt, MESHES, 3);
    }

    /**
     * Every matrix product of the table on {@code rounds} random cases per mesh, floating point, against torch on
     * {@code runtime}; {@link GenericOpsInProcessesTest} runs it with worker processes.
     */
    static void walk(DTorch runtime, int[][] meshes, int rounds) {
        int checked = 0;
        for (String name : MatmulStrategy.NAMES.stream().sorted().toList()) {
            for (int[] mesh : meshes) {
                for (int round = 0; round < rounds; round++) {
                    Case c = randomCase(name);
                    assertEquals("matmul", StrategyTable.of(c.call()).family(), name);
                    checkAgainstTorch(runtime, c, F, mesh);
                    checked++;
                }
            }
        }
        assertTrue(checked >= MatmulStrategy.NAMES.size() * meshes.length * rounds, "walked " + checked);
    }

    @Test
    void shouldMultiplyIntegersExactly() {
        for (String name : List.of("mm", "bmm", "matmul")) {
            for (int[] mesh : MESHES) {
                checkAgainstTorch(dt, randomCase(name), ScalarType.Long, mesh);
            }
        }
    }

    /** {@code c} on random placements (partial sums included) of random inputs against libtorch on the whole tensors. */
    private static void checkAgainstTorch(DTorch runtime, Case c, ScalarType dtype, int[] meshShape) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        List<Tensor> locals = new ArrayList<>();
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (long[] shape : c.shapes()) {
                Tensor t = GenericOpsTest.random(shape, dtype);
                locals.add(t);
                inputs.add(GenericOpsTest.distribute(runtime, t, mesh, true));
            }
            GenericOpsTest.assertLikeTorch(runtime, c.call(), locals, inputs, meshShape);
        } finally {
            inputs.forEach(DTensor::close);
            locals.forEach(Tensor::close);
        }
    }

    /** The placements {@code call} chooses for inputs of {@code shapes} with {@code placements} on a 2-device mesh. */
    private static ShardingStrategy.Decision decide(AtenCall call, long[][] shapes, Placement... placements) {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        List<org.dtorch.core.graph.TensorMeta> metas = new ArrayList<>();
        for (int i = 0; i < shapes.length; i++) {
            metas.add(new org.dtorch.core.graph.TensorMeta(shapes[i], F, Rules.sharding(mesh, List.of(placements[i]))));
        }
        return new AtenSpec(call).decide(metas);
    }

    private static void assertDecision(AtenCall call, long[][] shapes, Placement[] in, Placement[] wantIn, Placement out) {
        ShardingStrategy.Decision d = decide(call, shapes, in);
        String what = call + " on " + Arrays.toString(in);
        assertEquals(Arrays.stream(wantIn).map(List::of).toList(), d.inputs(), what);
        assertEquals(List.of(List.of(out)), d.outputs(), what);
    }

    @Test
    void shouldKeepTheTensorParallelLayoutsAndMoveOthersTheCheapestWay() {
        AtenCall mm = call("mm", "T,T", null, null);
        long[][] square = {{8, 6}, {6, 2}};
        Placement s0 = Placement.shard(0);
        Placement s1 = Placement.shard(1);
        assertDecision(mm, square, new Placement[] {R, R}, new Placement[] {R, R}, R);
        assertDecision(mm, square, new Placement[] {s0, R}, new Placement[] {s0, R}, s0);
        assertDecision(mm, square, new Placement[] {R, s1}, new Placement[] {R, s1}, s1);
        assertDecision(mm, square, new Placement[] {s1, s0}, new Placement[] {s1, s0}, P);
        assertDecision(mm, square, new Placement[] {P, R}, new Placement[] {P, R}, P);
        assertDecision(mm, square, new Placement[] {R, P}, new Placement[] {R, P}, P);
        // Rows of a sharded, b's rows too: gathering b's 12 elements beats moving a's 48 (b gathered, a kept).
        assertDecision(mm, square, new Placement[] {s0, s0}, new Placement[] {s0, R}, s0);
        // Only a replicated a is sliced locally, never gathered.
        assertDecision(mm, square, new Placement[] {R, s0}, new Placement[] {s1, s0}, P);

        AtenCall linear = call("linear", "T,T,T", null, null, null);
        long[][] layer = {{5, 8}, {6, 8}, {6}};
        assertDecision(linear, layer, new Placement[] {R, s0, s0}, new Placement[] {R, s0, s0}, s1);
        assertDecision(linear, layer, new Placement[] {s1, s1, R}, new Placement[] {s1, s1, P}, P);
        assertDecision(linear, layer, new Placement[] {s0, R, R}, new Placement[] {s0, R, R}, s0);

        AtenCall matmul = call("matmul", "T,T", null, null);
        assertDecision(matmul, new long[][] {{4, 1, 6, 8}, {3, 8, 5}}, new Placement[] {s0, R}, new Placement[] {s0, R}, s0);
        assertDecision(matmul, new long[][] {{4, 1, 6, 8}, {3, 8, 5}}, new Placement[] {R, s0},
            new Placement[] {R, s0}, Placement.shard(1));
        assertDecision(call("bmm", "T,T", null, null), new long[][] {{4, 6, 8}, {4, 8, 5}}, new Placement[] {s0, s0},
            new Placement[] {s0, s0}, s0);

        AtenCall einsum = call("einsum", "s,[T]", "ij,jk->ik", Collections.nCopies(2, null));
        assertDecision(einsum, square, new Placement[] {s1, s0}, new Placement[] {s1, s0}, P);
        assertDecision(einsum, square, new Placement[] {s0, R}, new Placement[] {s0, R}, s0);
        assertDecision(call("einsum", "s,[T]", "ii->i", Collections.nCopies(1, null)), new long[][] {{6, 6}}, new Placement[] {s0},
            new Placement[] {R}, R);
    }

    @Test
    void shouldAddTheBiasOnceUnderARowParallelLayer() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        try (Tensor x = torch.rand(3, 8); Tensor w = torch.rand(5, 8); Tensor b = torch.rand(5);
             DTensor dx = dt.tensor(x, mesh, Placement.shard(1)); DTensor dw = dt.tensor(w, mesh, Placement.shard(1));
             DTensor db = dt.tensor(b, mesh, R);
             DTensor y = dt.aten(call("linear", "T,T,T", null, null, null), dx, dw, db).getFirst();
             Tensor got = y.toTorch(); Tensor want = torch.linear(x, w, new org.bytedeco.pytorch.TensorOptional(b))) {
            assertEquals(List.of(P), y.placements());
            assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false), got + " vs " + want);
        }
    }

    @Test
    void shouldRefuseMisfitShapesAndPlacementsListingTheLegalOnes() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        try (DTensor a = dt.tensor(torch.rand(4, 6), mesh, Placement.shard(0)); DTensor b = dt.tensor(torch.rand(5, 4), mesh, R)) {
            IllegalArgumentException shapes = assertThrows(IllegalArgumentException.class, () -> dt.aten(call("mm", "T,T", null, null), a, b));
            assertTrue(shapes.getMessage().contains("aten::mm") && shapes.getMessage().contains("[4, 6]"), shapes.getMessage());
            try (DTensor c = dt.tensor(torch.rand(6, 4), mesh, Placement.shard(0))) {
                ShardingException direct = Strict.refuses(dt, ShardingException.class, () -> dt.apply(new AtenSpec(call("mm", "T,T", null, null)), a, c));
                assertTrue(direct.getMessage().contains("matmul strategy") && direct.getMessage().contains("giving P(sum)"), direct.getMessage());
            }
        }
    }
}
