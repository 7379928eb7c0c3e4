package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(120)
class FactoriesAndRulesTest {
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).defaultMesh(new int[] {2, 2}, "dp", "tp").build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    private static String values(DTensor t) {
        try (Tensor v = t.toTorch()) {
            return TorchTensors.format(v, 64);
        }
    }

    @Test
    void shouldMakeTheSameValuesWhateverTheMesh() {
        long[] shape = {5, 6};
        DeviceMesh one = dt.mesh(0);
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        DeviceMesh square = dt.defaultMesh();
        for (Placement[] placements : List.of(new Placement[] {Placement.shard(0)}, new Placement[] {Placement.shard(1)},
            new Placement[] {Placement.replicate()})) {
            assertEquals(values(dt.randn(42, shape, one)), values(dt.randn(42, shape, line, placements)));
            assertEquals(values(dt.rand(7, shape, one)), values(dt.rand(7, shape, line, placements)));
        }
        assertEquals(values(dt.randn(42, shape, one)), values(dt.randn(42, shape, square, Placement.shard(1), Placement.shard(0))));
        try (Generator g = torch.make_generator_cpu(42); Tensor expected = torch.randn(shape, new GeneratorOptional(g))) {
            assertEquals(TorchTensors.format(expected, 64), values(dt.randn(42, shape, line, Placement.shard(0))));
        }
    }

    @Test
    void shouldMakeConstantsRangesAndTensorsFromJavaData() {
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        assertEquals("[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]", values(dt.zeros(new long[] {2, 4}, line, Placement.shard(1))));
        assertEquals("[[1, 1], [1, 1], [1, 1], [1, 1]]", values(dt.ones(new long[] {4, 2}, ScalarType.Long, line, Placement.shard(0))));
        assertEquals("[2.5, 2.5, 2.5, 2.5, 2.5]", values(dt.full(2.5, new long[] {5}, line, Placement.shard(0))));
        assertEquals("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", values(dt.arange(10).redistribute(dt.defaultMesh(), Placement.replicate(), Placement.replicate())));
        assertEquals("[1.0, 1.5, 2.0, 2.5, 3.0]", values(dt.arange(1, 3.25, 0.5, ScalarType.Float, line, Placement.shard(0))));
        assertEquals(List.of(5L, 5L),
            java.util.Arrays.stream(dt.empty(new long[] {5, 5}, ScalarType.Float, line, Placement.shard(0)).shape()).boxed().toList());
        assertEquals("[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]",
            values(dt.tensor(new float[] {1, 2, 3, 4, 5, 6}, new long[] {2, 3}, dt.mesh(1, 3), Placement.shard(1))));
        assertEquals("[[1, 2], [3, 4]]",
            values(dt.tensor(new long[] {1, 2, 3, 4}, new long[] {2, 2}, dt.defaultMesh(), Placement.shard(0), Placement.shard(1))));
        assertEquals("[0.5, 0.25]", values(dt.tensor(new double[] {0.5, 0.25}, new long[] {2}, dt.mesh(0, 1), Placement.shard(0))));
        assertThrows(IllegalArgumentException.class, () -> dt.tensor(new float[] {1, 2, 3}, new long[] {2, 2}, line));
    }

    @Test
    void shouldNameTheOperatorThePlacementsAndTheLegalOnes() {
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        DTensor rows = dt.ones(new long[] {4, 8}, line, Placement.shard(0));
        DTensor cols = dt.ones(new long[] {4, 8}, line, Placement.shard(1));
        assertEquals("[16.0, 16.0, 16.0, 16.0]", values(rows.add(cols).sum(1)), "implicit: one input moves (an all-to-all)");
        ShardingException add = Strict.refuses(dt, ShardingException.class, () -> rows.add(cols));
        assertTrue(add.getMessage().startsWith("add: cannot take inputs with placements [S(0)] and [S(1)]"), add.getMessage());
        assertTrue(add.getMessage().contains("Legal: per mesh dimension, R with R; S on the same result dimension"), add.getMessage());
        assertTrue(add.getMessage().contains("no redistribution is inserted implicitly"), add.getMessage());

        DTensor partial = rows.sum(0);
        assertEquals("[4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]", values(partial.relu()), "implicit: the partial sums are reduced first");
        assertEquals("[5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]", values(partial.add(1.0)));
        ShardingException relu = Strict.refuses(dt, ShardingException.class, partial::relu);
        assertTrue(relu.getMessage().contains("relu: cannot take inputs with placements [P(sum)]") && relu.getMessage().contains("Legal: S or R"),
            relu.getMessage());
        ShardingException plusOne = Strict.refuses(dt, ShardingException.class, () -> partial.add(1.0));
        assertTrue(plusOne.getMessage().contains("a scalar does not distribute over partial P(sum)"), plusOne.getMessage());

        DTensor elsewhere = dt.ones(new long[] {4, 8}, dt.mesh(0, 1), Placement.shard(0));
        IllegalArgumentException meshes = assertThrows(IllegalArgumentException.class, () -> rows.add(elsewhere));
        assertTrue(meshes.getMessage().contains("inputs live on different meshes"), meshes.getMessage());
        IllegalArgumentException shapes = assertThrows(IllegalArgumentException.class, () -> rows.add(dt.ones(new long[] {6, 8}, line, Placement.shard(0))));
        assertTrue(shapes.getMessage().contains("do not broadcast"), shapes.getMessage());
        assertThrows(ShardingException.class, () -> dt.zeros(new long[] {4}, line, Placement.partial()));
        IllegalArgumentException negative = assertThrows(IllegalArgumentException.class, () -> dt.zeros(new long[] {-3}, line, Placement.shard(0)));
        assertTrue(negative.getMessage().contains("zeros") && negative.getMessage().contains("-3"), negative.getMessage());
        assertEquals("[0.0, 0.0, 0.0]", values(dt.zeros(new long[] {3}, line, Placement.shard(0))), "3 over 4: the last device's shard is empty");
        IllegalArgumentException stranger = assertThrows(IllegalArgumentException.class,
            () -> dt.ones(new long[] {4}, org.dtorch.core.distributed.DeviceMesh.of(dt.deviceKind(), 0, 9), Placement.shard(0)));
        assertTrue(stranger.getMessage().contains("device 9 is not one of this runtime's cpu devices 0..3"), stranger.getMessage());
        // The runtime is still fine.
        assertEquals("[8.0, 8.0, 8.0, 8.0]", values(rows.sum(1)));
    }
}
