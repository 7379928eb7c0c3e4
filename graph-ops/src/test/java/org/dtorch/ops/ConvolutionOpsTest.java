package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The convolution, pooling, interpolation and attention strategies ({@link ConvolutionStrategy},
 * {@link SpatialStrategy}, {@link AttentionStrategy}) against libtorch on whole tensors: every operator of those
 * families in the {@link StrategyTable} on random small shapes (uneven shards included), random parameters and random
 * placements (partial sums included) on 1-, 2-, 4- and 2x2-device meshes, and the placements each rule gives.
 */
@Timeout(300)
class ConvolutionOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};
    private static final Random RANDOM = new Random(7);

    @BeforeAll
    static void seed() {
        torch.manual_seed(7); // the tensors' values too, so that a failure repeats
    }

    /** One case of a walk: the call and its whole inputs. */
    private record Case(AtenCall call, List<Tensor> inputs) {
    }

    private static int between(int low, int high) {
        return low + RANDOM.nextInt(high - low + 1);
    }

    private static List<Long> ints(int n, int low, int high) {
        return Stream.generate(() -> (long) between(low, high)).limit(n).toList();
    }

    private static long[] spatialShape(long n, long c, int k, int low, int high) {
        long[] s = new long[k + 2];
        s[0] = n;
        s[1] = c;
        for (int i = 0; i < k; i++) {
            s[2 + i] = between(low, high);
        }
        return s;
    }

    @Test
    void shouldRunEveryConvolutionOfTheTableLikeTorch() {
        Set<String> seen = walkConvolutions(dt, 3);
        assertTrue(seen.containsAll(Set.of("S(0)", "S(1)", "P(sum)", "R")), "the walk reaches every rule: " + seen);
    }

    @Test
    void shouldRunEveryPoolingAndInterpolationOfTheTableLikeTorch() {
        Set<String> seen = walkPoolingAndInterpolation(dt, 2);
        assertTrue(seen.containsAll(Set.of("S(0)", "S(1)", "P(sum)", "R")), "the walk reaches every rule: " + seen);
    }

    @Test
    void shouldRunAttentionLikeTorch() {
        Set<String> seen = walkAttention(dt, 8);
        assertTrue(seen.containsAll(Set.of("S(0)", "S(1)", "R")), "the walk reaches every rule: " + seen);
    }

    /**
     * Every convolution of the table, {@code trials} random cases per mesh, on {@code runtime}; the output placements seen.
     * {@link GenericOpsInProcessesTest} walks with worker processes.
     */
    static Set<String> walkConvolutions(DTorch runtime, int trials) {
        return walk(runtime, ConvolutionStrategy.NAMES, ConvolutionOpsTest::convolution, trials);
    }

    /** Every pooling and interpolation of the tables, as {@link #walkConvolutions}. */
    static Set<String> walkPoolingAndInterpolation(DTorch runtime, int trials) {
        Set<String> seen = new TreeSet<>(walk(runtime, SpatialStrategy.POOLING, ConvolutionOpsTest::pooling, trials));
        seen.addAll(walk(runtime, SpatialStrategy.INTERPOLATE, ConvolutionOpsTest::interpolation, trials));
        return seen;
    }

    /** Attention, as {@link #walkConvolutions}. */
    static Set<String> walkAttention(DTorch runtime, int trials) {
        return walk(runtime, AttentionStrategy.NAMES, name -> attention(), trials);
    }

    /** {@code trials} random cases of every name on every mesh against torch; the output placements seen. */
    private static Set<String> walk(DTorch runtime, Set<String> names, Function<String, Case> cases, int trials) {
        Set<String> seen = new TreeSet<>();
        for (String name : names.stream().sorted().toList()) {
            for (int[] mesh : MESHES) {
                for (int trial = 0; trial < trials; trial++) {
                    Case c = cases.apply(name);
                    assertEquals(expectedStrategy(name), StrategyTable.of(c.call()).getClass(), name);
                    checkAgainstTorch(runtime, c, mesh).forEach(p -> seen.add(p.toString()));
                }
            }
        }
        return seen;
    }

    private static Class<?> expectedStrategy(String name) {
        return ConvolutionStrategy.NAMES.contains(name) ? ConvolutionStrategy.class
            : AttentionStrategy.NAMES.contains(name) ? AttentionStrategy.class : SpatialStrategy.class;
    }

    /** The number of spatial dimensions a name of these families says ({@code conv1d}: 1; {@code conv2d}, {@code convolution}: 2). */
    private static int spatial(String name) {
        return name.contains("3d") ? 3 : name.contains("1d") ? 1 : 2;
    }

    /** A convolution of random groups, stride, padding, dilation, bias and batching; transposed by the name or a flag. */
    private static Case convolution(String name) {
        int k = spatial(name);
        boolean generic = name.contains("convolution");
        boolean transposed = name.startsWith("conv_transpose") || generic && RANDOM.nextBoolean();
        long groups = RANDOM.nextInt(4) == 0 ? 2 : 1;
        long cin = groups * between(2, 5);
        long cout = groups * between(2, 5);
        long[] x = spatialShape(between(2, 5), cin, k, 5, k == 3 ? 6 : 8);
        if (!generic && RANDOM.nextInt(4) == 0) {
            x = Arrays.copyOfRange(x, 1, x.length);
        }
        long[] w = spatialShape(transposed ? cin : cout, (transposed ? cout : cin) / groups, k, 1, 3);
        boolean bias = RANDOM.nextBoolean();
        List<Long> stride = ints(k, 1, 2);
        List<Long> padding = ints(k, 0, 1);
        List<Long> dilation = ints(k, 1, 2);
        List<Long> zeros = ints(k, 0, 0);
        String tensors = bias ? "T,T,T" : "T,T,n";
        AtenCall call;
        if (!transposed && !generic && RANDOM.nextInt(3) == 0) {
            String mode = RANDOM.nextBoolean() ? "same" : "valid";
            call = GenericOpsTest.call(name, tensors + "|padding=s|dilation=[i]|groups=i", null, null, null, mode, dilation, groups);
        } else if (name.startsWith("conv_transpose")) {
            call = GenericOpsTest.call(name, tensors + ",[i],[i],[i],i,[i]", null, null, null, stride, padding, zeros, groups, dilation);
        } else if (name.equals("_convolution")) {
            call = GenericOpsTest.call(name, tensors + ",[i],[i],[i],b,[i],i,b,b,b,b", null, null, null, stride, padding, dilation,
                transposed, zeros, groups, false, true, true, true);
        } else if (generic) {
            call = GenericOpsTest.call(name, tensors + ",[i],[i],[i],b,[i],i", null, null, null, stride, padding, dilation, transposed,
                zeros, groups);
        } else {
            call = GenericOpsTest.call(name, tensors + ",[i],[i],[i],i", null, null, null, stride, padding, dilation, groups);
        }
        List<Tensor> inputs = new ArrayList<>(List.of(torch.randn(x), torch.randn(w)));
        if (bias) {
            inputs.add(torch.randn(cout));
        }
        return new Case(call, inputs);
    }

    /** A pooling of random kernel, stride, padding, dilation and ceil mode, or an adaptive one of random output size. */
    private static Case pooling(String name) {
        int k = spatial(name);
        long[] x = spatialShape(between(2, 5), between(2, 6), k, 5, k == 3 ? 6 : 9);
        if (RANDOM.nextInt(4) == 0) {
            x = Arrays.copyOfRange(x, 1, x.length);
        }
        List<Long> kernel = ints(k, 2, 3);
        List<Long> stride = ints(k, 1, 2);
        List<Long> padding = ints(k, 0, 1);
        boolean ceil = RANDOM.nextBoolean();
        AtenCall call;
        if (name.contains("adaptive")) {
            call = GenericOpsTest.call(name, "T,[i]", null, ints(k, 1, 4));
        } else if (name.startsWith("max")) {
            call = GenericOpsTest.call(name, "T,[i],[i],[i],[i],b", null, kernel, stride, padding, ints(k, 1, 2), ceil);
        } else {
            call = GenericOpsTest.call(name, "T,[i],[i],[i],b,b", null, kernel, stride, padding, ceil, RANDOM.nextBoolean());
        }
        return new Case(call, List.of(torch.randn(x)));
    }

    /** An interpolation to a random output size or by random scale factors (align_corners random where it exists). */
    private static Case interpolation(String name) {
        int k = spatial(name);
        long[] x = spatialShape(between(2, 5), between(2, 5), k, 2, 5);
        boolean linear = !name.contains("nearest");
        boolean corners = RANDOM.nextBoolean();
        AtenCall call;
        if (RANDOM.nextBoolean()) {
            List<Long> size = ints(k, 2, 9);
            call = linear ? GenericOpsTest.call(name, "T,[i],b", null, size, corners) : GenericOpsTest.call(name, "T,[i]", null, size);
        } else {
            List<Double> scales = Stream.generate(() -> 0.5 + RANDOM.nextInt(4) * 0.5).limit(k).toList();
            call = linear ? GenericOpsTest.call(name, "T,n,b,[f]", null, null, corners, scales)
                : GenericOpsTest.call(name, "T,n,[f]", null, null, scales);
        }
        return new Case(call, List.of(torch.randn(x)));
    }

    /** Attention over random batch, heads and lengths, with a causal flag, a boolean or float mask, or grouped heads. */
    private static Case attention() {
        long n = between(2, 5);
        long h = between(2, 5);
        long l = between(2, 6);
        long s = between(2, 6);
        long e = between(2, 4);
        boolean gqa = RANDOM.nextInt(4) == 0;
        long kvHeads = gqa ? 1 : h;
        List<Tensor> inputs = new ArrayList<>(List.of(torch.randn(n, h, l, e), torch.randn(n, kvHeads, s, e), torch.randn(n, kvHeads, s, e + 1)));
        int variant = RANDOM.nextInt(4);
        AtenCall call;
        if (variant == 0) {
            call = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null, true, gqa);
        } else if (variant == 1) {
            try (Tensor u = torch.rand(l, s); org.bytedeco.pytorch.Scalar third = new org.bytedeco.pytorch.Scalar(0.3)) {
                inputs.add(u.gt(third));
            }
            call = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T,T|enable_gqa=b", null, null, null, null, gqa);
        } else if (variant == 2) {
            inputs.add(torch.randn(n, 1, l, s));
            call = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T,T|scale=f|enable_gqa=b", null, null, null, null, 0.7, gqa);
        } else {
            call = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T|enable_gqa=b", null, null, null, gqa);
        }
        return new Case(call, inputs);
    }

    /** Each input distributed with random placements (P(sum) included for floating inputs) over {@code meshShape}; the result against torch. */
    private static List<Placement> checkAgainstTorch(DTorch runtime, Case c, int[] meshShape) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        List<DTensor> inputs = new ArrayList<>();
        try {
            for (Tensor t : c.inputs()) {
                inputs.add(GenericOpsTest.distribute(runtime, t, mesh, torch.isFloatingType(t.scalar_type()), RANDOM));
            }
            return GenericOpsTest.assertLikeTorch(runtime, c.call(), c.inputs(), inputs, meshShape);
        } finally {
            inputs.forEach(DTensor::close);
            c.inputs().forEach(Tensor::close);
        }
    }

    private static List<Placement> placementsOf(AtenCall call, DTensor... inputs) {
        return dt.aten(call, inputs).getFirst().placements();
    }

    @Test
    void shouldKeepBatchAndOutChannelShardsAndSumOverInputChannelShards() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2});
        try (Tensor x = torch.randn(4, 6, 5, 5); Tensor w = torch.randn(8, 6, 3, 3); Tensor b = torch.randn(8);
             DTensor xBatch = dt.tensor(x, mesh, Placement.shard(0)); DTensor xChannels = dt.tensor(x, mesh, Placement.shard(1));
             DTensor xRows = dt.tensor(x, mesh, Placement.shard(2)); DTensor xAll = dt.tensor(x, mesh, R);
             DTensor wOut = dt.tensor(w, mesh, Placement.shard(0)); DTensor wIn = dt.tensor(w, mesh, Placement.shard(1));
             DTensor wAll = dt.tensor(w, mesh, R); DTensor bAll = dt.tensor(b, mesh, R)) {
            AtenCall withBias = GenericOpsTest.call("conv2d", "T,T,T", null, null, null);
            AtenCall noBias = GenericOpsTest.call("conv2d", "T,T", null, null);
            assertEquals(List.of(Placement.shard(0)), placementsOf(withBias, xBatch, wOut, bAll), "batch first; the weight is gathered");
            assertEquals(List.of(Placement.shard(1)), placementsOf(withBias, xAll, wOut, bAll), "out-channels; the bias is sliced");
            assertEquals(List.of(Placement.partial()), placementsOf(noBias, xChannels, wAll), "in-channels: a partial sum");
            assertEquals(List.of(Placement.partial()), placementsOf(noBias, xAll, wIn), "in-channels from the weight");
            assertEquals(List.of(R), placementsOf(withBias, xChannels, wIn, bAll), "in-channels with a bias gather");
            assertEquals(List.of(R), placementsOf(noBias, xRows, wAll), "spatial shards gather");
            try (DTensor xPartial = xAll.redistribute(Placement.partial())) {
                assertEquals(List.of(Placement.partial()), placementsOf(noBias, xPartial, wAll), "linear in the input");
                assertEquals(List.of(R), placementsOf(withBias, xPartial, wAll, bAll), "not linear with a bias");
            }
            ShardingException e = Strict.refuses(dt, ShardingException.class, () -> dt.apply(new AtenSpec(withBias), xRows, wAll, bAll));
            assertTrue(e.getMessage().contains("convolution") && e.getMessage().contains("input S(0) (batch)"), e.getMessage());
            AtenCall strided = GenericOpsTest.call("conv2d", "T,T,n,[i]|padding=s", null, null, null, List.of(2L, 2L), "same");
            IllegalArgumentException same = assertThrows(IllegalArgumentException.class, () -> dt.aten(strided, xBatch, wAll));
            assertTrue(same.getMessage().contains("aten::conv2d.padding does not take") && !same.getMessage().contains("frame #"),
                "libtorch's refusal of the constants, in one line: " + same.getMessage());
            try (Tensor five = torch.randn(8, 5, 3, 3); DTensor wFive = dt.tensor(five, mesh, R)) {
                IllegalArgumentException channels = assertThrows(IllegalArgumentException.class, () -> dt.aten(noBias, xAll, wFive));
                assertTrue(channels.getMessage().contains("6 channels"), channels.getMessage());
            }
        }
    }

    @Test
    void shouldKeepLeadingShardsOfPoolingAndAttentionAndGatherSpatialOnes() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(4, 6, 6, 6); DTensor batchRows = dt.tensor(x, mesh, Placement.shard(0), Placement.shard(2));
             DTensor whole = dt.tensor(x, mesh, R, R); DTensor partial = whole.redistribute(Placement.partial(), Placement.shard(1))) {
            assertEquals(List.of(Placement.shard(0), R), placementsOf(GenericOpsTest.call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), batchRows));
            assertEquals(List.of(Placement.partial(), Placement.shard(1)),
                placementsOf(GenericOpsTest.call("avg_pool2d", "T,[i]", null, List.of(2L, 2L)), partial), "average pooling is linear");
            assertEquals(List.of(R, Placement.shard(1)),
                placementsOf(GenericOpsTest.call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), partial), "max pooling is not");
            assertEquals(List.of(Placement.partial(), Placement.shard(1)),
                placementsOf(GenericOpsTest.call("upsample_bilinear2d", "T,[i],b", null, List.of(9L, 9L), false), partial));
        }
        try (Tensor q = torch.randn(2, 4, 5, 3); Tensor kv = torch.randn(2, 4, 6, 3); Tensor m = torch.randn(2, 4, 5, 6);
             Tensor m2 = torch.randn(5, 6);
             DTensor dq = dt.tensor(q, mesh, Placement.shard(1), Placement.shard(2)); DTensor dk = dt.tensor(kv, mesh, R, R);
             DTensor dm = dt.tensor(m, mesh, R, R); DTensor dm2 = dt.tensor(m2, mesh, R, R)) {
            AtenCall masked = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T,T", null, null, null, null);
            List<DTensor> out = dt.aten(masked, dq, dk, dk, dm);
            assertEquals(List.of(Placement.shard(1), R), out.getFirst().placements(), "heads stay sharded; the query sequence is gathered");
            assertEquals(List.of(Placement.shard(1), R), placementsOf(masked, dq, dk, dk, dm2), "a broadcast mask stays replicated");
            AtenCall dropout = GenericOpsTest.call("scaled_dot_product_attention", "T,T,T,n,f", null, null, null, null, 0.1);
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, () -> dt.aten(dropout, dq, dk, dk));
            assertTrue(e.getMessage().contains("dropout_p"), e.getMessage());
        }
    }
}
