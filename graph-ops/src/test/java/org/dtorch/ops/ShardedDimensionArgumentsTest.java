package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import java.util.stream.Stream;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.ops.PlacementMatrix.Input;
import org.dtorch.ops.PlacementMatrix.Op;
import org.dtorch.ops.PlacementMatrix.Shards;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Operators whose arguments name dimensions, sizes or indices, given arguments at the edges, on sharded dimensions:
 * the whole dimension ({@code narrow(0, 0, size)}), zero-length results ({@code narrow(0, 2, 0)}, {@code slice(5, 5)},
 * a repeat of 0), and negative dimensions and indices. The arguments are global: a device whose shard keeps a
 * dimension must not run them against its local shard as they are. Each call runs on every placement of its inputs
 * over four devices in a row, and on a sample of placements over a 2x2 mesh (the slow run: every placement of a
 * one-input call, a larger sample of the others), against torch on the whole tensors, with implicit redistribution and
 * in the strict mode ({@link PlacementMatrix}). Partial values with no elements (a partial tensor narrowed to nothing,
 * then gathered) reach the collectives as zero-size tensors.
 *
 * <p>The cost is the number of cases, some 3,000 in every build at a few milliseconds each (a case places its inputs,
 * runs the call twice and gathers both results, each a step on all four device threads). On the 2x2 mesh every build
 * keeps the placement lists that use both mesh dimensions ({@link #usesBothMeshDimensions}): a list that replicates
 * over one mesh dimension shards or sums over two devices what the line already does over four, and the slow run
 * takes those too.
 */
@Timeout(300)
class ShardedDimensionArgumentsTest extends FourDeviceRuntime {
    /** Placements of each case that every build runs on the 2x2 mesh (the slow run takes them all). */
    private static final int SQUARE_SAMPLE = 3;
    private static final int[] LINE = {4};
    private static final int[] SQUARE = {2, 2};
    /** The tensor most calls take: both dimensions long enough to shard over four devices, neither divisible by four. */
    private static final Input X = Input.f(7, 5);

    /** Runs every case on both meshes and asserts that none failed, listing every failure; partial values with no elements aside. */
    private static void assertLikeTorch(List<Op> ops) {
        assertLikeTorch(ops, false, SQUARE_SAMPLE);
    }

    /**
     * Runs the cases of {@code ops} on both meshes, those that reduce partial values with no elements exactly when
     * {@code emptyPartials} ({@link #reducesEmptyPartials}), and asserts that none failed, listing every failure. On
     * the line every placement runs; on the 2x2 mesh the representative sample with {@code squareSample} placements of
     * each case chosen at random, of those the lists that use both mesh dimensions ({@link #usesBothMeshDimensions}), or
     * every placement of a one-input case when it is 0 (the slow run: {@link #shouldRunEveryCaseOnEveryPlacementOfTheSquareMesh}).
     */
    private static void assertLikeTorch(List<Op> ops, boolean emptyPartials, int squareSample) {
        Random random = new Random(5);
        List<String> reports = new ArrayList<>();
        for (Op op : ops) {
            for (int[] mesh : new int[][] {LINE, SQUARE}) {
                boolean every = mesh.length == 1 || op.inputs().size() == 1 && squareSample == 0;
                List<List<List<Placement>>> combos = every
                    ? PlacementMatrix.every(op, mesh, Shards.NON_EMPTY)
                    : PlacementMatrix.representative(op, mesh, squareSample == 0 ? 6 : squareSample, random);
                boolean emptyResult = givesEmptyTensors(op);
                combos = combos.stream().filter(c -> reducesEmptyPartials(op, c, emptyResult) == emptyPartials)
                    .filter(c -> squareSample == 0 || mesh.length == 1 || usesBothMeshDimensions(c)).toList();
                if (combos.isEmpty()) {
                    continue;
                }
                PlacementMatrix.Outcome outcome = PlacementMatrix.run(dt, op, mesh, combos);
                if (outcome.failed()) {
                    reports.add(Arrays.toString(mesh) + " " + outcome.report(op));
                }
            }
        }
        assertEquals(List.of(), reports);
    }

    /**
     * True when each input of {@code combo} is either replicated on the whole mesh or sharded or partial on every mesh
     * dimension: the lists that the line cannot stand for (a dimension sharded twice over, two dimensions sharded at once,
     * a partial value sharded), and the replicated inputs beside them.
     */
    private static boolean usesBothMeshDimensions(List<List<Placement>> combo) {
        return combo.stream().allMatch(l -> l.stream().allMatch(Placement::isReplicate) || l.stream().noneMatch(Placement::isReplicate));
    }

    /**
     * True when {@code combo} makes partial values with no elements that a collective then reduces: an input with no
     * elements is partial, or a partial input gives a result with no elements ({@code emptyResult}), which passes the
     * partial placement on.
     */
    private static boolean reducesEmptyPartials(Op op, List<List<Placement>> combo, boolean emptyResult) {
        boolean anyPartial = false;
        for (int i = 0; i < combo.size(); i++) {
            boolean partial = combo.get(i).stream().anyMatch(Placement::isPartial);
            if (partial && Arrays.stream(op.inputs().get(i).shape()).anyMatch(s -> s == 0)) {
                return true;
            }
            anyPartial |= partial;
        }
        return anyPartial && emptyResult;
    }

    /** True when torch's {@code op} gives a tensor with no elements. */
    private static boolean givesEmptyTensors(Op op) {
        List<Tensor> values = PlacementMatrix.values(op, 31);
        List<Tensor> results = op.torchOp().apply(values);
        boolean empty = results.stream().anyMatch(t -> t.numel() == 0);
        values.forEach(Tensor::close);
        results.forEach(Tensor::close);
        return empty;
    }

    private static Op op(String label, AtenCall call, Input... inputs) {
        return Op.aten(label, call, List.of(inputs), List.of());
    }

    private static Op op(String label, OpSpec spec, AtenCall reference, Input... inputs) {
        return new Op("hand-written", label, spec, List.of(inputs), reference::call, List.of());
    }

    private static List<Long> longs(long... values) {
        List<Long> out = new ArrayList<>();
        for (long v : values) {
            out.add(v);
        }
        return out;
    }

    static List<Op> narrows() {
        return List.of(
            op("narrow(0, 0, 7): whole", call("narrow", "T,i,i,i", null, 0L, 0L, 7L), X),
            op("narrow(-2, -7, 7): whole from the end", call("narrow", "T,i,i,i", null, -2L, -7L, 7L), X),
            op("narrow(-1, 0, 5): whole", call("narrow", "T,i,i,i", null, -1L, 0L, 5L), X),
            op("narrow(0, 2, 0): empty", call("narrow", "T,i,i,i", null, 0L, 2L, 0L), X),
            op("narrow(0, 7, 0): empty at the end", call("narrow", "T,i,i,i", null, 0L, 7L, 0L), X),
            op("narrow(1, -3, 2)", call("narrow", "T,i,i,i", null, 1L, -3L, 2L), X));
    }

    static List<Op> slices() {
        return List.of(
            op("slice(0, 0, 7): whole", call("slice", "T,i,i,i,i", null, 0L, 0L, 7L, 1L), X),
            op("slice(-2, -7, 7): whole from the end", call("slice", "T,i,i,i,i", null, -2L, -7L, 7L, 1L), X),
            op("slice(1, -100, 100): whole, clamped", call("slice", "T,i,i,i,i", null, 1L, -100L, 100L, 1L), X),
            op("slice(0, 0, INT64_MAX): whole", call("slice", "T,i,i,i,i", null, 0L, 0L, Long.MAX_VALUE, 1L), X),
            op("slice(0, None, None, 3)", call("slice", "T,i,n,n,i", null, 0L, null, null, 3L), X),
            op("slice(0, 5, 5): empty", call("slice", "T,i,i,i,i", null, 0L, 5L, 5L, 1L), X),
            op("slice(0, 6, 2): empty, start after end", call("slice", "T,i,i,i,i", null, 0L, 6L, 2L, 1L), X),
            op("slice(-1, -3, None)", call("slice", "T,i,i,n", null, -1L, -3L, null), X));
    }

    static List<Op> selects() {
        return List.of(
            op("select(0, -1)", call("select", "T,i,i", null, 0L, -1L), X),
            op("select(-2, -7)", call("select", "T,i,i", null, -2L, -7L), X),
            op("select(-1, 4)", call("select", "T,i,i", null, -1L, 4L), X),
            op("select(1, -5)", call("select", "T,i,i", null, 1L, -5L), X));
    }

    static List<Op> splits() {
        return List.of(
            op("split(7, 0): one whole piece", call("split", "T,i|dim=i", null, 7L, 0L), X),
            op("split(10, -1): a piece longer than the dimension", call("split", "T,i|dim=i", null, 10L, -1L), X),
            op("split(3, -2)", call("split", "T,i|dim=i", null, 3L, -2L), X),
            op("split_with_sizes([7, 0], 0): an empty piece", call("split_with_sizes", "T,[i]|dim=i", null, longs(7, 0), 0L), X),
            op("split_with_sizes([0, 2, 3], -1)", call("split_with_sizes", "T,[i]|dim=i", null, longs(0, 2, 3), -1L), X),
            op("chunk(1, 0): whole", call("chunk", "T,i|dim=i", null, 1L, 0L), X),
            op("chunk(8, -2): more chunks than rows", call("chunk", "T,i|dim=i", null, 8L, -2L), X),
            op("tensor_split([0, 7], 0): empty first and last", call("tensor_split", "T,[i]|dim=i", null, longs(0, 7), 0L), X),
            op("tensor_split([-2], -1)", call("tensor_split", "T,[i]|dim=i", null, longs(-2), -1L), X),
            op("unbind(-1)", call("unbind", "T|dim=i", null, -1L), X),
            op("hsplit(5): every column a piece", call("hsplit", "T,i", null, 5L), X),
            op("vsplit([2, -1])", call("vsplit", "T,[i]", null, longs(2, -1)), X),
            op("stack(-1)", call("stack", "[T]|dim=i", Collections.nCopies(2, null), -1L), X, X),
            op("stack(-3)", call("stack", "[T]|dim=i", Collections.nCopies(2, null), -3L), X, X));
    }

    static List<Op> dimensionMoves() {
        Input x3 = Input.f(7, 5, 4);
        return List.of(
            op("transpose(-1, -2)", call("transpose", "T,i,i", null, -1L, -2L), X),
            op("permute([-1, 0, -2])", call("permute", "T,[i]", null, longs(-1, 0, -2)), x3),
            op("movedim(-1, 0)", call("movedim", "T,i,i", null, -1L, 0L), x3),
            op("flatten(-2, -1)", call("flatten", "T,i,i", null, -2L, -1L), x3),
            op("flatten(0, -2)", call("flatten", "T,i,i", null, 0L, -2L), x3),
            op("squeeze(-2) of [7, 1, 5]", call("squeeze", "T,i", null, -2L), Input.f(7, 1, 5)),
            op("unsqueeze(-1)", call("unsqueeze", "T,i", null, -1L), X),
            op("unsqueeze(-3)", call("unsqueeze", "T,i", null, -3L), X),
            op("repeat_interleave(2, -1)", call("repeat_interleave", "T,i|dim=i", null, 2L, -1L), X),
            op("cumsum(-1)", call("cumsum", "T,i", null, -1L), X));
    }

    static List<Op> scatters() {
        return List.of(
            op("slice_scatter(0, 0, 7): whole", call("slice_scatter", "T,T,i,i,i", null, null, 0L, 0L, 7L), X, Input.f(7, 5)),
            op("slice_scatter(-1, 3, 3): empty", call("slice_scatter", "T,T,i,i,i", null, null, -1L, 3L, 3L), X, Input.f(7, 0)),
            op("slice_scatter(-2, -3, None)", call("slice_scatter", "T,T,i,i,n", null, null, -2L, -3L, null), X, Input.f(3, 5)),
            op("select_scatter(0, -1)", call("select_scatter", "T,T,i,i", null, null, 0L, -1L), X, Input.f(5)),
            op("select_scatter(-1, -5)", call("select_scatter", "T,T,i,i", null, null, -1L, -5L), X, Input.f(7)),
            op("index_copy(-2, [6, 0])", call("index_copy", "T,i,T,T", null, -2L, null, null), X, Input.indices(6, 0), Input.f(2, 5)),
            op("index_copy(-1, []): nothing", call("index_copy", "T,i,T,T", null, -1L, null, null), X, Input.indices(), Input.f(7, 0)));
    }

    static List<Op> reshapesAndRepeats() {
        return List.of(
            op("unflatten(0, [7]): whole", call("unflatten", "T,i,[i]", null, 0L, longs(7)), X),
            op("unflatten(0, [1, 7])", call("unflatten", "T,i,[i]", null, 0L, longs(1, 7)), X),
            op("unflatten(-1, [5, 1])", call("unflatten", "T,i,[i]", null, -1L, longs(5, 1)), X),
            op("unflatten(-2, [-1, 7])", call("unflatten", "T,i,[i]", null, -2L, longs(-1, 7)), X),
            op("expand([7, 5]): whole", call("expand", "T,[i]", null, longs(7, 5)), X),
            op("expand([-1, -1])", call("expand", "T,[i]", null, longs(-1, -1)), X),
            op("expand([3, -1, -1])", call("expand", "T,[i]", null, longs(3, -1, -1)), X),
            op("expand([0, 7, 5]): an empty new dimension", call("expand", "T,[i]", null, longs(0, 7, 5)), X),
            op("expand([7, 6]) of [7, 1]", call("expand", "T,[i]", null, longs(7, 6)), Input.f(7, 1)),
            op("repeat([1, 1]): whole", call("repeat", "T,[i]", null, longs(1, 1)), X),
            op("repeat([1, 1, 1])", call("repeat", "T,[i]", null, longs(1, 1, 1)), X),
            op("repeat([0, 1]): empty", call("repeat", "T,[i]", null, longs(0, 1)), X),
            op("repeat([1, 0]): empty", call("repeat", "T,[i]", null, longs(1, 0)), X),
            op("repeat([2, 1])", call("repeat", "T,[i]", null, longs(2, 1)), X));
    }

    static List<Op> rollsAndFlips() {
        return List.of(
            op("roll(7, 0): by the whole dimension", call("roll", "T,[i],[i]", null, longs(7), longs(0)), X),
            op("roll(-1, -2)", call("roll", "T,[i],[i]", null, longs(-1), longs(-2)), X),
            op("roll(-6, -1)", call("roll", "T,[i],[i]", null, longs(-6), longs(-1)), X),
            op("roll(0, 0)", call("roll", "T,[i],[i]", null, longs(0), longs(0)), X),
            op("roll(-1): flattened", call("roll", "T,i", null, -1L), X),
            op("flip(-1)", call("flip", "T,[i]", null, longs(-1)), X),
            op("flip(-2, -1)", call("flip", "T,[i]", null, longs(-2, -1)), X));
    }

    static List<Op> indexSelects() {
        return List.of(
            op("index_select(0, 0..6): whole", call("index_select", "T,i,T", null, 0L, null), X, Input.indices(0, 1, 2, 3, 4, 5, 6)),
            op("index_select(-1, 0..4): whole", call("index_select", "T,i,T", null, -1L, null), X, Input.indices(0, 1, 2, 3, 4)),
            op("index_select(0, []): empty", call("index_select", "T,i,T", null, 0L, null), X, Input.indices()),
            op("index_select(-2, [6, 0, 6, 3])", call("index_select", "T,i,T", null, -2L, null), X, Input.indices(6, 0, 6, 3)));
    }

    static List<Op> reductions() {
        AtenCall sumLast = call("sum", "T|dim=[i]", null, longs(-1));
        return List.of(
            op("sum(-1)", sumLast, X),
            op("sum([-2, -1], keepdim)", call("sum", "T|dim=[i]|keepdim=b", null, longs(-2, -1), true), X),
            op("sum(dim=None): everything", call("sum", "T|dim=n", null, null), X),
            op("amax(-2)", call("amax", "T|dim=[i]", null, longs(-2)), X),
            op("mean(-1, keepdim)", call("mean", "T|dim=[i]|keepdim=b", null, longs(-1), true), X),
            op("argmax(-2)", call("argmax", "T|dim=i", null, -2L), X),
            op("logsumexp(-1)", call("logsumexp", "T,[i]", null, longs(-1)), X),
            op("ReduceSpec sum(-1)", new ReduceSpec(ReduceSpec.Kind.SUM, new int[] {-1}, false), sumLast, X),
            op("ReduceSpec mean(-2, keepdim)", new ReduceSpec(ReduceSpec.Kind.MEAN, new int[] {-2}, true),
                call("mean", "T|dim=[i]|keepdim=b", null, longs(-2), true), X),
            op("ReduceSpec max([-1, -2])", new ReduceSpec(ReduceSpec.Kind.MAX, new int[] {-1, -2}, false),
                call("amax", "T|dim=[i]", null, longs(-1, -2)), X),
            op("var(-1, correction 0)", call("var", "T|dim=[i]|correction=i", null, longs(-1), 0L), X),
            op("std([-2], keepdim)", call("std", "T|dim=[i]|keepdim=b", null, longs(-2), true), X),
            op("norm(2, [-1])", call("norm", "T,f,[i]", null, 2.0, longs(-1)), X),
            op("argmax(-1, keepdim)", call("argmax", "T|dim=i|keepdim=b", null, -1L, true), X),
            op("amin([-2, -1])", call("amin", "T|dim=[i]", null, longs(-2, -1)), X),
            op("max(-1): values and indices", call("max", "T,i", null, -1L), X),
            op("prod(-2)", call("prod", "T,i", null, -2L), X));
    }

    static List<Op> normalizations() {
        return List.of(
            op("softmax(-1)", call("softmax", "T,i", null, -1L), X),
            op("softmax(-2)", call("softmax", "T,i", null, -2L), X),
            op("log_softmax(-1)", call("log_softmax", "T,i", null, -1L), X),
            op("softmax(-3) of [7, 5, 4]", call("softmax", "T,i", null, -3L), Input.f(7, 5, 4)),
            op("layer_norm([5]) of [4, 7, 5]", call("layer_norm", "T,[i]", null, longs(5)), Input.f(4, 7, 5)),
            op("layer_norm([7, 5]) of [4, 7, 5]", call("layer_norm", "T,[i]", null, longs(7, 5)), Input.f(4, 7, 5)));
    }

    static List<Op> cats() {
        AtenCall cat0 = call("cat", "[T]|dim=i", Collections.nCopies(2, null), 0L);
        return List.of(
            op("cat(0)", cat0, X, Input.f(5, 5)),
            op("cat(-2)", call("cat", "[T]|dim=i", Collections.nCopies(2, null), -2L), X, Input.f(6, 5)),
            op("cat(-1)", call("cat", "[T]|dim=i", Collections.nCopies(2, null), -1L), X, Input.f(7, 6)),
            op("cat(0) with an empty [0, 5]", cat0, X, Input.f(0, 5)),
            op("cat(1) with an empty [7, 0]", call("cat", "[T]|dim=i", Collections.nCopies(2, null), 1L), X, Input.f(7, 0)),
            op("cat(0) of three", call("cat", "[T]|dim=i", Collections.nCopies(3, null), 0L), X, Input.f(0, 5), Input.f(4, 5)));
    }

    static List<Op> pads() {
        return List.of(
            op("pad([0, 0]): nothing", call("constant_pad_nd", "T,[i]", null, longs(0, 0)), X),
            op("pad([0, 0, 2, 0]): rows before", call("constant_pad_nd", "T,[i]", null, longs(0, 0, 2, 0)), X),
            op("pad([-1, -1]): crop the columns", call("constant_pad_nd", "T,[i]", null, longs(-1, -1)), X),
            op("pad([0, 0, -2, -1]): crop the rows", call("constant_pad_nd", "T,[i]", null, longs(0, 0, -2, -1)), X),
            op("pad([1, -1])", call("constant_pad_nd", "T,[i]", null, longs(1, -1)), X),
            op("pad([-5, 0]): no columns left", call("constant_pad_nd", "T,[i]", null, longs(-5, 0)), X),
            op("pad([-1, 2], value 1.5)", call("pad", "T,[i],s,f", null, longs(-1, 2), "constant", 1.5), X));
    }

    @Test
    void shouldNarrowToTheWholeDimensionToNothingAndFromTheEnd() {
        assertLikeTorch(narrows());
    }

    @Test
    void shouldSliceTheWholeDimensionNothingAndFromTheEnd() {
        assertLikeTorch(slices());
    }

    @Test
    void shouldSelectFromTheEnd() {
        assertLikeTorch(selects());
    }

    @Test
    void shouldSplitAndChunkIntoWholeEmptyAndNegativeDimensionPieces() {
        assertLikeTorch(splits());
    }

    @Test
    void shouldUnflattenExpandAndRepeatToWholeAndEmptySizes() {
        assertLikeTorch(reshapesAndRepeats());
    }

    @Test
    void shouldMoveDimensionsCountedFromTheEnd() {
        assertLikeTorch(dimensionMoves());
    }

    @Test
    void shouldScatterIntoWholeEmptyAndNegativeSlices() {
        assertLikeTorch(scatters());
    }

    @Test
    void shouldRollAndFlipNegativeAndWholeDimensions() {
        assertLikeTorch(rollsAndFlips());
    }

    @Test
    void shouldIndexSelectTheWholeDimensionNothingAndANegativeDimension() {
        assertLikeTorch(indexSelects());
    }

    @Test
    void shouldReduceOverNegativeDimensions() {
        assertLikeTorch(reductions());
    }

    @Test
    void shouldNormalizeOverTheLastDimensionCountedFromTheEnd() {
        assertLikeTorch(normalizations());
    }

    @Test
    void shouldCatAlongAShardedDimensionWithEmptyInputs() {
        assertLikeTorch(cats());
    }

    @Test
    void shouldPadWithZeroAndNegativeWidths() {
        assertLikeTorch(pads());
    }

    /** The Java API's shape methods and indexing, which check and normalize their arguments before the ATen call. */
    @Test
    void shouldTakeEdgeArgumentsThroughTheJavaApi() {
        List<Function<DTensor, DTensor>> ours = List.of(t -> t.narrow(-2, -7, 7), t -> t.narrow(0, 7, 0), t -> t.narrow(-1, -5, 5),
            t -> t.transpose(-1, -2), t -> t.permute(-1, -2), t -> t.softmax(-1), t -> t.sum(new int[] {-1}, true), t -> t.max(-2),
            t -> t.reshape(-1), t -> t.getItem(Index.slice(0L, 7L)), t -> t.getItem(Index.slice(-100L, 100L), Index.at(-1)),
            t -> t.getItem(Index.slice(5L, 5L)), t -> t.getItem(Index.ellipsis(), Index.slice(-3L, null)), t -> t.getItem(Index.at(-7)));
        List<Function<Tensor, Tensor>> theirs = List.of(t -> t.narrow(0, 0, 7), t -> t.narrow(0, 7, 0), t -> t.narrow(1, 0, 5),
            t -> t.transpose(1, 0), t -> t.permute(1, 0), t -> t.softmax(1), t -> t.sum(new long[] {1}, true, new ScalarTypeOptional()),
            t -> t.amax(new long[] {0}, false), t -> t.reshape(-1), Tensor::clone, t -> t.select(1, 4), t -> t.narrow(0, 5, 0),
            t -> t.narrow(1, 2, 3), t -> t.select(0, 0));
        List<String> failures = new ArrayList<>();
        try (Tensor x = torch.rand(7, 5)) {
            for (int[] meshShape : new int[][] {LINE, SQUARE}) {
                DeviceMesh mesh = dt.initDeviceMesh(meshShape);
                for (List<Placement> layout : PlacementMatrix.layouts(X, meshShape, Shards.NON_EMPTY)) {
                    for (int k = 0; k < ours.size(); k++) {
                        try (DTensor d = PlacementMatrix.place(dt, x, mesh, layout); Tensor want = theirs.get(k).apply(x)) {
                            String problem = PlacementMatrix.compareOutputs(List.of(ours.get(k).apply(d)), List.of(want));
                            if (problem != null) {
                                failures.add("call " + k + " on " + layout + ": " + problem);
                            }
                        }
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    /**
     * The cases above that reduce partial values with no elements (a partial tensor narrowed, sliced, padded or repeated
     * to nothing, then gathered): the collectives take zero-size tensors as any others.
     */
    @Test
    void shouldGatherPartialValuesWithNoElements() {
        assertLikeTorch(all(), true, SQUARE_SAMPLE);
    }

    /** Every case above on every placement of the 2x2 mesh (every build runs a sample of them there, and all on the line). */
    @Test
    @Tag("slow")
    void shouldRunEveryCaseOnEveryPlacementOfTheSquareMesh() {
        assertLikeTorch(all(), false, 0);
        assertLikeTorch(all(), true, 0);
    }

    /** Every case of every family above. */
    static List<Op> all() {
        return Stream.of(narrows(), slices(), selects(), splits(), dimensionMoves(), reshapesAndRepeats(), rollsAndFlips(), indexSelects(),
            scatters(), reductions(), normalizations(), cats(), pads()).flatMap(List::stream).toList();
    }

    /** True when {@code op} takes or gives a tensor with no elements. */
    static boolean touchesEmptyTensors(Op op) {
        return givesEmptyTensors(op) || op.inputs().stream().anyMatch(i -> Arrays.stream(i.shape()).anyMatch(d -> d == 0));
    }
}
