package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BiFunction;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.PlacementMatrix.Op;
import org.dtorch.ops.PlacementMatrix.Shards;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * Implicit redistribution against torch over the placement matrix ({@link PlacementMatrix}): representative operators of
 * every family, on every pair of input placements from {R, S(0), S(1), ..., P(sum)} over a 1-D mesh of four devices, and
 * on a representative sample of placement lists over a 2x2 mesh, with uneven shards. Every case gives
 * torch's value through implicit redistribution; in the strict mode the cases that fit run and the others are refused
 * with a {@link org.dtorch.core.graph.ShardingException}. The full products of three or more inputs and every
 * pair on the 2x2 mesh are tagged {@code slow}; dimensions shorter than their split (empty shards) run on the line by
 * default and on the 2x2 mesh tagged {@code slow}.
 */
@Timeout(600)
class PlacementMatrixTest extends FourDeviceRuntime {
    private static final int[] LINE = {4};
    private static final int[] SQUARE = {2, 2};

    /** One dynamic test per operator: its combinations from {@code combos}, every failure listed. */
    private static List<DynamicTest> perOp(List<Op> ops, int[] meshShape, BiFunction<Op, int[], List<List<List<Placement>>>> combos) {
        List<DynamicTest> tests = new ArrayList<>();
        for (Op op : ops) {
            tests.add(DynamicTest.dynamicTest(op.toString(), () -> {
                List<List<List<Placement>>> cases = combos.apply(op, meshShape);
                assertFalse(cases.isEmpty(), op + " has no cases");
                PlacementMatrix.Outcome outcome = PlacementMatrix.run(dt, op, meshShape, cases);
                assertFalse(outcome.failed(), () -> outcome.report(op));
            }));
        }
        return tests;
    }

    @Test
    void shouldCoverEveryFamilyOfTheStrategyTableAndEveryHandWrittenOperator() {
        Set<String> families = new TreeSet<>();
        PlacementMatrix.ops().forEach(o -> families.add(o.family()));
        assertTrue(families.containsAll(List.of("pointwise", "reduction", "matmul", "normalization", "batch_norm", "embedding",
            "concat-split", "convolution", "pooling", "interpolate", "attention", "view", "dropout", "replicate",
            "binary", "unary", "scalar", "reduce", "cast")), families.toString());
    }

    /** Every pair of input placements on four devices in a row; operators of three or more inputs by pairs. */
    @TestFactory
    List<DynamicTest> everyPairOfPlacementsOnFourDevicesGivesTorchsValue() {
        return perOp(PlacementMatrix.ops(), LINE, (op, mesh) -> PlacementMatrix.withMustFit(op, PlacementMatrix.pairs(op, mesh)));
    }

    /** A representative sample of placement lists on a 2x2 mesh. */
    @TestFactory
    List<DynamicTest> representativePlacementsOnATwoByTwoMeshGiveTorchsValue() {
        Random random = new Random(7);
        return perOp(PlacementMatrix.ops(), SQUARE, (op, mesh) -> PlacementMatrix.representative(op, mesh, 4, random));
    }

    /** The full product of the placements of operators of three or more inputs, on four devices in a row. */
    @Tag("slow")
    @TestFactory
    List<DynamicTest> everyCombinationOfThreeOrMoreInputsOnFourDevicesGivesTorchsValue() {
        List<Op> many = PlacementMatrix.ops().stream().filter(o -> o.inputs().size() > 2).toList();
        return perOp(many, LINE, (op, mesh) -> PlacementMatrix.every(op, mesh, Shards.NON_EMPTY));
    }

    /** Every pair of input placement lists on a 2x2 mesh; operators of three or more inputs by pairs. */
    @Tag("slow")
    @TestFactory
    List<DynamicTest> everyPairOfPlacementsOnATwoByTwoMeshGivesTorchsValue() {
        return perOp(PlacementMatrix.ops(), SQUARE, PlacementMatrix::pairs);
    }

    /**
     * Inputs sharded along dimensions shorter than their split (2 or 3 over four devices): some devices hold empty
     * shards, which must give torch's value as any other shards do.
     */
    @TestFactory
    List<DynamicTest> emptyShardsOnALineGiveTorchsValue() {
        return perOp(PlacementMatrix.emptyShardOps(), LINE, (op, mesh) -> withEmptyShards(op, mesh));
    }

    /** The same over two on each dimension of a 2x2 mesh. */
    @Tag("slow")
    @TestFactory
    List<DynamicTest> emptyShardsOnASquareGiveTorchsValue() {
        return perOp(PlacementMatrix.emptyShardOps(), SQUARE, (op, mesh) -> withEmptyShards(op, mesh));
    }

    /** Every combination in which at least one input has an empty shard. */
    private static List<List<List<Placement>>> withEmptyShards(Op op, int[] meshShape) {
        List<List<List<Placement>>> out = new ArrayList<>();
        for (List<List<Placement>> combo : PlacementMatrix.every(op, meshShape, Shards.ANY)) {
            boolean empty = false;
            for (int i = 0; i < combo.size(); i++) {
                empty |= PlacementMatrix.hasEmptyShards(op.inputs().get(i).shape(), combo.get(i), meshShape);
            }
            if (empty) {
                out.add(combo);
            }
        }
        return out;
    }
}
