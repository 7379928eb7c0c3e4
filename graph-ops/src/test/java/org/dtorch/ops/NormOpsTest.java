package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The normalization, softmax, batch-norm, embedding and dropout strategies against libtorch on whole tensors: every
 * operator of those families on random shapes (uneven shards included) and random placements over 1-, 2-, 4- and
 * 2x2-device meshes, and the placements each strategy keeps, gathers or refuses. {@link GenericOpsInProcessesTest} runs
 * the walk on a 2x2 mesh with worker processes.
 */
@Timeout(300)
class NormOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement S2 = Placement.shard(2);
    private static final Random RANDOM = new Random(29);
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};

    /** One call of the walk: the call, then its whole inputs (the walk closes them). */
    private record Case(AtenCall call, List<Tensor> inputs) {
    }

    @Test
    void shouldRunEveryOperatorOfTheseFamiliesLikeTorchOnRandomShapesAndPlacements() {
        walk(dt, MESHES, 2);
    }

    /**
     * Every operator of these families, {@code rounds} times on fresh shapes and placements over every mesh of
     * {@code meshes}, against torch on {@code runtime} ({@link GenericOpsInProcessesTest} uses it with worker processes).
     */
    static void walk(DTorch runtime, int[][] meshes, int rounds) {
        int checked = 0;
        for (int[] mesh : meshes) {
            for (int round = 0; round < rounds; round++) {
                for (Case c : cases()) {
                    walk(runtime, c, mesh);
                    checked++;
                }
            }
        }
        assertTrue(checked >= meshes.length * rounds * (StrategyTable.normalizationNames().size() + 4), "walked " + checked);
    }

    /** One call per operator of the families, on fresh random shapes. */
    private static List<Case> cases() {
        long n = 3 + RANDOM.nextInt(6);
        long c = 4 + RANDOM.nextInt(6);
        long l = 5 + RANDOM.nextInt(6);
        List<Case> out = new ArrayList<>();
        for (String name : StrategyTable.normalizationNames()) {
            switch (name) {
                case "softmax", "log_softmax" -> out.add(new Case(GenericOpsTest.call(name, "T,i", null, (long) RANDOM.nextInt(3) - 3),
                    List.of(torch.randn(n, c, l))));
                case "_softmax", "_log_softmax" -> out.add(new Case(GenericOpsTest.call(name, "T,i,b", null, (long) RANDOM.nextInt(3), false),
                    List.of(torch.randn(n, c, l))));
                case "layer_norm", "rms_norm", "_fused_rms_norm" -> {
                    boolean two = RANDOM.nextBoolean();
                    List<Long> normalized = two ? List.of(c, l) : List.of(l);
                    long[] shape = two ? new long[] {c, l} : new long[] {l};
                    AtenCall call = switch (name) {
                        case "layer_norm" -> GenericOpsTest.call(name, "T,[i],T,T", null, normalized, null, null);
                        case "rms_norm" -> GenericOpsTest.call(name, "T,[i],T", null, normalized, null);
                        default -> GenericOpsTest.call(name, "T,[i],T,f", null, normalized, null, 1e-5); // the output and rstd
                    };
                    List<Tensor> in = new ArrayList<>(List.of(torch.randn(n, c, l), torch.randn(shape)));
                    if (name.equals("layer_norm")) {
                        in.add(torch.randn(shape));
                    }
                    out.add(new Case(call, in));
                }
                case "_softmax_backward_data", "_log_softmax_backward_data" -> out.add(new Case(GenericOpsTest.call(name, "T,T,i,d", null, null,
                    (long) RANDOM.nextInt(3), org.bytedeco.pytorch.global.torch.ScalarType.Float), List.of(torch.randn(n, c, l), torch.randn(n, c, l))));
                case "group_norm" -> out.add(new Case(GenericOpsTest.call(name, "T,i,T,T", null, 2L, null, null),
                    List.of(torch.randn(n, 2 * c, l), torch.randn(2 * c), torch.randn(2 * c))));
                default -> throw new AssertionError("no case for " + name);
            }
        }
        out.add(new Case(GenericOpsTest.call("batch_norm", "T,T,T,T,T,b,f,f,b", null, null, null, null, null, false, 0.1, 1e-5, false),
            List.of(torch.randn(n, c, l), torch.randn(c), torch.randn(c), torch.randn(c), positive(c))));
        out.add(new Case(GenericOpsTest.call("batch_norm", "T,T,T,n,n,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5, false),
            List.of(torch.randn(n, c, l), torch.randn(c), torch.randn(c))));
        out.add(new Case(GenericOpsTest.call("embedding", "T,T", null, null),
            List.of(torch.randn(l + 2, c), torch.randint(0, l + 2, new long[] {n, c}))));
        out.add(new Case(GenericOpsTest.call("dropout", "T,f,b", null, 0.5, false), List.of(torch.randn(n, c, l))));
        return out;
    }

    private static Tensor positive(long c) {
        try (Tensor u = torch.rand(c); Scalar half = new Scalar(0.5)) {
            return u.add(half);
        }
    }

    private static void walk(DTorch runtime, Case c, int[] meshShape) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (Tensor t : c.inputs()) {
                inputs.add(GenericOpsTest.distribute(runtime, t, mesh, torch.isFloatingType(t.scalar_type())));
            }
            GenericOpsTest.assertLikeTorch(runtime, c.call(), c.inputs(), inputs, meshShape);
        } finally {
            inputs.forEach(DTensor::close);
            c.inputs().forEach(Tensor::close);
        }
    }

    /** The placements of {@code call}'s first output on {@code inputs}, checked against torch on the way. */
    private static List<Placement> placements(AtenCall call, DeviceMesh mesh, List<Tensor> whole, Placement[]... ps) {
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (int i = 0; i < whole.size(); i++) {
                inputs.add(dt.tensor(whole.get(i), mesh, ps[i]));
            }
            try (DTensor out = dt.aten(call, inputs.toArray(DTensor[]::new)).getFirst()) {
                GenericOpsTest.assertLikeTorch(dt, call, whole, inputs, mesh.shape());
                return out.placements();
            }
        } finally {
            inputs.forEach(DTensor::close);
        }
    }

    private static Placement[] p(Placement... ps) {
        return ps;
    }

    @Test
    void shouldKeepShardsOutsideTheNormalizedDimensionsAndGatherTheOthers() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(5, 6, 7); Tensor w = torch.randn(7); Tensor b = torch.randn(7);
             Tensor g = torch.randn(6); Tensor h = torch.randn(6)) {
            assertEquals(List.of(S0), placements(GenericOpsTest.call("softmax", "T,i", null, -1L), line, List.of(x), p(S0)));
            assertEquals(List.of(S1), placements(GenericOpsTest.call("softmax", "T,i", null, 0L), line, List.of(x), p(S0)),
                "the softmax dimension moves to another dimension: an all-to-all moves less than gathering it");
            AtenCall layerNorm = GenericOpsTest.call("layer_norm", "T,[i],T,T", null, List.of(7L), null, null);
            assertEquals(List.of(S1, S0), placements(layerNorm, grid, List.of(x, w, b), p(S1, S2), p(S0, R), p(R, R)),
                "a normalized dim moves to an independent one (an all-to-all), others stay, weight and bias replicated");
            AtenCall groupNorm = GenericOpsTest.call("group_norm", "T,i,T,T", null, 3L, null, null);
            assertEquals(List.of(S0, S0), placements(groupNorm, grid, List.of(x, g, h), p(S0, S1), p(R, R), p(R, R)),
                "the normalized dimension 1 moves to the batch dimension, split further (an all-to-all)");
            try (DTensor dx = dt.tensor(x, line, S0); DTensor partial = dx.redistribute(Placement.partial())) {
                assertEquals(List.of(S0), dt.aten(GenericOpsTest.call("layer_norm", "T,[i]", null, List.of(7L)), partial).getFirst().placements(),
                    "a partial input is reduced first, scattered over an independent dimension");
            }
        }
    }

    @Test
    void shouldShardBatchNormStatisticsWithTheChannelsAndRefuseTrainingUpdates() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {2});
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(4, 5, 6); Tensor w = torch.randn(5); Tensor b = torch.randn(5); Tensor mean = torch.randn(5);
             Tensor var = positive(5)) {
            AtenCall eval = GenericOpsTest.call("batch_norm", "T,T,T,T,T,b,f,f,b", null, null, null, null, null, false, 0.1, 1e-5, false);
            List<Tensor> all = List.of(x, w, b, mean, var);
            assertEquals(List.of(S0, S2), placements(eval, grid, all, p(S0, S2), p(R, R), p(R, R), p(R, R), p(R, R)),
                "evaluation keeps batch and spatial shards");
            assertEquals(List.of(S1), placements(eval, line, all, p(S1), p(R), p(S0), p(R), p(R)),
                "a channel shard takes the per-channel tensors sharded alike");
            AtenCall batchStats = GenericOpsTest.call("batch_norm", "T,T,T,n,n,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5, false);
            assertEquals(List.of(S1, R), placements(batchStats, grid, List.of(x, w, b), p(S1, S0), p(R, R), p(R, R)),
                "batch statistics keep only the channel shard");
            AtenCall update = GenericOpsTest.call("batch_norm", "T,T,T,T,T,b,f,f,b", null, null, null, null, null, true, 0.1, 1e-5, false);
            try (DTensor dx = dt.tensor(x, line, S0); DTensor dm = dt.tensor(mean, line, R); DTensor dv = dt.tensor(var, line, R)) {
                UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, () -> dt.aten(update, dx, dm, dm, dm, dv));
                assertTrue(e.getMessage().contains("running_mean and running_var in place"), e.getMessage());
            }
        }
    }

    @Test
    void shouldPickEmbeddingRowsFromShardedIndicesAndFromRowColumnAndPartialWeights() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {2});
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor w = torch.randn(9, 6); Tensor idx = torch.randint(0, 9, new long[] {5, 4})) {
            AtenCall embedding = GenericOpsTest.call("embedding", "T,T", null, null);
            List<Tensor> both = List.of(w, idx);
            assertEquals(List.of(S0, S1), placements(embedding, grid, both, p(R, R), p(S0, S1)), "indices shards stay");
            assertEquals(List.of(S2), placements(embedding, line, both, p(S1), p(S0)), "a column-sharded weight stays, indices gather");
            Placement sum = Placement.partial();
            assertEquals(List.of(sum), placements(embedding, line, both, p(S0), p(S1)), "a row-sharded weight gives partial sums");
            assertEquals(List.of(sum, sum), placements(embedding, grid, both, p(S0, S0), p(R, S0)), "nested row shards too");
            assertEquals(List.of(sum, S0), placements(embedding, grid, both, p(S0, R), p(R, S0)), "rows on one mesh dim, indices on the other");
            try (DTensor dw = dt.tensor(w, line, R); DTensor partial = dw.redistribute(Placement.partial()); DTensor di = dt.tensor(idx, line, S0);
                 DTensor out = dt.aten(embedding, partial, di).getFirst(); Tensor got = out.toTorch(); Tensor want = torch.embedding(w, idx)) {
                assertEquals(List.of(Placement.partial()), out.placements(), "rows of partial sums are partial sums of rows");
                assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false));
            }
        }
    }

    @Test
    void shouldRunDropoutInEvaluationAsTheIdentityAndRefuseItInTraining() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {2});
        try (Tensor x = torch.randn(4, 6); DTensor dx = dt.tensor(x, line, S0); DTensor partial = dx.redistribute(Placement.partial())) {
            AtenCall eval = GenericOpsTest.call("dropout", "T,f,b", null, 0.3, false);
            assertEquals("dropout", StrategyTable.of(eval).family());
            try (DTensor out = dt.aten(eval, partial).getFirst(); Tensor got = out.toTorch()) {
                assertEquals(List.of(Placement.partial()), out.placements(), "the identity keeps partial values");
                assertTrue(torch.equal(got, x) || torch.allclose(got, x, 1e-6, 1e-7, false));
            }
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                () -> dt.aten(GenericOpsTest.call("dropout", "T,f,b", null, 0.3, true), dx));
            assertTrue(e.getMessage().contains("dtorch.nn.functional.dropout"), e.getMessage());
        }
    }

    @Test
    void shouldRefuseWrongPlacementsGivenByHandListingTheLegalOnes() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {2});
        try (Tensor x = torch.randn(4, 6); DTensor dx = dt.tensor(x, line, S1)) {
            ShardingException e = Strict.refuses(dt, ShardingException.class,
                () -> dt.apply(new AtenSpec(GenericOpsTest.call("softmax", "T,i", null, 1L)), dx));
            assertTrue(e.getMessage().contains("normalization") && e.getMessage().contains("a dimension it does not normalize"), e.getMessage());
            IndexOutOfBoundsException dim = assertThrows(IndexOutOfBoundsException.class, () -> dx.softmax(2));
            assertTrue(dim.getMessage().startsWith("softmax: dimension 2"), dim.getMessage());
        }
    }
}
