package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.aten.AtenCall;

/**
 * The placement matrix: representative operators of every family of the {@link StrategyTable} and of the hand-written
 * operators, and the input placements to run them on. Each case runs twice: with implicit redistribution, where it must
 * give torch's value whatever the placements, and in the strict mode, where it must either run (and give torch's value)
 * or refuse with a {@link ShardingException} that names the placements, refusing exactly the cases whose inputs the
 * operator's choice would move. {@link PlacementMatrixTest} runs it in threads, {@link PlacementMatrixInProcessesTest}
 * in worker processes.
 */
final class PlacementMatrix {
    static final Placement R = Placement.replicate();
    static final Placement P = Placement.partial();
    static final Placement S0 = Placement.shard(0);
    static final Placement S1 = Placement.shard(1);
    static final Placement S2 = Placement.shard(2);
    private static final ScalarType F = ScalarType.Float;
    /** Failures listed per operator before the rest are only counted. */
    private static final int LISTED = 12;

    private PlacementMatrix() {
    }

    /**
     * One input of an operator: its shape, its dtype and, for an index, the exclusive bound of its random values or
     * ({@code fixed}, not null) the values themselves.
     */
    record Input(long[] shape, ScalarType dtype, long bound, long[] fixed) {
        static Input f(long... shape) {
            return new Input(shape, F, 0, null);
        }

        static Input index(long bound, long... shape) {
            return new Input(shape, ScalarType.Long, bound, null);
        }

        /** An index of these values, in this order. */
        static Input indices(long... values) {
            return new Input(new long[] {values.length}, ScalarType.Long, 0, values.clone());
        }

        static Input mask(long... shape) {
            return new Input(shape, ScalarType.Bool, 0, null);
        }

        /** Partial values of this input: sums of indices or of floats; a bool has no sum to split. */
        boolean canBePartial() {
            return dtype != ScalarType.Bool;
        }

        @Override
        public String toString() {
            return TorchTensors.dtypeName(dtype) + Arrays.toString(shape);
        }
    }

    /**
     * One operator of the matrix: its family (the strategy table's name, or the hand-written operator's), the spec that
     * runs it (a {@link PlacementChoice}), its inputs, torch's operator on whole tensors, and placements (of a 1-D mesh)
     * the family's rule runs as they are, which the strict mode must take.
     */
    record Op(String family, String label, OpSpec spec, List<Input> inputs, Function<List<Tensor>, List<Tensor>> torchOp,
              List<List<Placement>> mustFit) {
        static Op aten(String label, AtenCall call, List<Input> inputs, List<List<Placement>> mustFit) {
            return new Op(StrategyTable.of(call).family(), label, new AtenSpec(call), inputs, call::call, mustFit);
        }

        PlacementChoice choice() {
            return (PlacementChoice) spec;
        }

        @Override
        public String toString() {
            return family + ": " + label + " on " + inputs;
        }
    }

    static List<Placement> p(Placement... ps) {
        return List.of(ps);
    }

    @SafeVarargs
    private static List<List<Placement>> fits(List<Placement>... lists) {
        return List.of(lists);
    }

    private static List<Input> in(Input... inputs) {
        return List.of(inputs);
    }

    /**
     * The operators, one or two per family, on shapes whose dimensions mostly do not divide by 4 (5 and 7 over four
     * devices, uneven shards). Placements that would split a dimension shorter than its number of shards (a 3x3 kernel
     * over four devices) are left to {@link #emptyShardOps} and the {@code emptyshards} tests.
     */
    static List<Op> ops() {
        List<Op> ops = new ArrayList<>();
        // The hand-written operators (DTensor's methods run them).
        ops.add(new Op("binary", "add", BinarySpec.ADD, in(Input.f(5, 7), Input.f(5, 7)), t -> List.of(t.get(0).add(t.get(1))),
            fits(p(R, R), p(S0, S0), p(S1, S1), p(P, P))));
        ops.add(new Op("binary", "mul broadcast", BinarySpec.MUL, in(Input.f(5, 7), Input.f(7)), t -> List.of(t.get(0).mul(t.get(1))),
            fits(p(R, R), p(S0, R), p(S1, S0), p(P, R))));
        ops.add(new Op("unary", "gelu", UnarySpec.of(UnarySpec.Kind.GELU), in(Input.f(5, 7)), t -> List.of(torch.gelu(t.get(0))),
            fits(p(R), p(S0), p(S1))));
        ops.add(new Op("scalar", "mul 2.5", new ScalarSpec(ScalarSpec.Kind.MUL, 2.5), in(Input.f(5, 7)),
            t -> {
                try (Scalar s = new Scalar(2.5)) {
                    return List.of(t.get(0).mul(s));
                }
            }, fits(p(R), p(S0), p(S1), p(P))));
        ops.add(new Op("reduce", "sum dim 1 keepdim", new ReduceSpec(ReduceSpec.Kind.SUM, new int[] {1}, true), in(Input.f(5, 7)),
            call("sum", "T|dim=[i]|keepdim=b", null, List.of(1L), true)::call, fits(p(R), p(S0), p(S1), p(P))));
        ops.add(new Op("reduce", "mean all", new ReduceSpec(ReduceSpec.Kind.MEAN, new int[0], false), in(Input.f(5, 7)),
            call("mean", "T", (Object) null)::call, fits(p(R), p(S0), p(S1), p(P))));
        ops.add(new Op("cast", "to float64", new CastSpec(ScalarType.Double), in(Input.f(5, 7)),
            t -> List.of(t.get(0).to(ScalarType.Double)), fits(p(R), p(S0), p(S1), p(P))));
        // The generic path: the strategy table's families.
        ops.add(Op.aten("where", call("where", "T,T,T", null, null, null), in(Input.mask(5, 7), Input.f(5, 7), Input.f(7)),
            fits(p(R, R, R), p(S0, S0, R), p(S1, S1, S0))));
        ops.add(Op.aten("gelu", call("gelu", "T", (Object) null), in(Input.f(5, 7)), fits(p(R), p(S0), p(S1))));
        ops.add(Op.aten("amax dim 0 keepdim", call("amax", "T|dim=[i]|keepdim=b", null, List.of(0L), true), in(Input.f(7, 5)),
            fits(p(R), p(S0), p(S1))));
        ops.add(Op.aten("sum all", call("sum", "T", (Object) null), in(Input.f(5, 7)), fits(p(R), p(S0), p(S1), p(P))));
        // The generic mean gathers a reduced dimension and reduces partial sums first (it is not summed and divided).
        ops.add(Op.aten("mean dim -1", call("mean", "T|dim=[i]", null, List.of(-1L)), in(Input.f(5, 7)), fits(p(R), p(S0))));
        ops.add(Op.aten("mm", call("mm", "T,T", null, null), in(Input.f(5, 6), Input.f(6, 7)),
            fits(p(R, R), p(S0, R), p(R, S1), p(S1, S0), p(P, R), p(R, P))));
        ops.add(Op.aten("linear with bias", ProductCalls.LINEAR_BIAS, in(Input.f(5, 6), Input.f(7, 6), Input.f(7)),
            fits(p(R, R, R), p(S0, R, R), p(R, S0, S0))));
        ops.add(Op.aten("bmm", call("bmm", "T,T", null, null), in(Input.f(5, 4, 6), Input.f(5, 6, 7)),
            fits(p(R, R), p(S0, S0), p(S1, R), p(R, S2), p(S2, S1))));
        ops.add(Op.aten("softmax dim -1", call("softmax", "T,i", null, -1L), in(Input.f(5, 7)), fits(p(R), p(S0))));
        ops.add(Op.aten("layer_norm", call("layer_norm", "T,[i],T,T", null, List.of(7L), null, null),
            in(Input.f(5, 6, 7), Input.f(7), Input.f(7)), fits(p(R, R, R), p(S0, R, R), p(S1, R, R))));
        ops.add(Op.aten("batch_norm eval", call("batch_norm", "T,T,T,T,T,b,f,f,b", null, null, null, null, null, false, 0.1, 1e-5, false),
            in(Input.f(5, 6, 7), Input.f(6), Input.f(6), Input.f(6), Input.f(6)), fits(p(R, R, R, R, R), p(S0, R, R, R, R))));
        ops.add(Op.aten("embedding", call("embedding", "T,T", null, null), in(Input.f(9, 6), Input.index(9, 5, 7)),
            fits(p(R, R), p(R, S0), p(R, S1), p(S1, R))));
        ops.add(Op.aten("cat dim 1", call("cat", "[T]|dim=i", Collections.nCopies(2, null), 1L), in(Input.f(5, 7), Input.f(5, 6)),
            fits(p(R, R), p(S0, S0), p(P, P))));
        ops.add(Op.aten("split 3 dim 0", call("split", "T,i|dim=i", null, 3L, 0L), in(Input.f(7, 5)), fits(p(R), p(S1))));
        ops.add(Op.aten("conv2d padding 1", call("conv2d", "T,T,n,[i],[i]", null, null, null, List.of(1L, 1L), List.of(1L, 1L)),
            in(Input.f(5, 4, 7, 6), Input.f(6, 4, 3, 3)), fits(p(R, R), p(S0, R), p(R, S0))));
        ops.add(Op.aten("max_pool2d", call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), in(Input.f(5, 4, 7, 6)),
            fits(p(R), p(S0), p(S1))));
        ops.add(Op.aten("interpolate bilinear", call("upsample_bilinear2d", "T,[i],b", null, List.of(9L, 11L), false),
            in(Input.f(5, 4, 7, 6)), fits(p(R), p(S0), p(S1), p(P))));
        ops.add(Op.aten("scaled_dot_product_attention", call("scaled_dot_product_attention", "T,T,T", null, null, null),
            in(Input.f(5, 4, 7, 6), Input.f(5, 4, 7, 6), Input.f(5, 4, 7, 6)), fits(p(R, R, R), p(S0, S0, S0), p(S1, S1, S1))));
        ops.add(Op.aten("reshape", call("reshape", "T,[i]", null, List.of(35L, 4L)), in(Input.f(5, 7, 4)), fits(p(R), p(P))));
        ops.add(Op.aten("transpose", call("transpose", "T,i,i", null, 0L, 1L), in(Input.f(5, 7)), fits(p(R), p(S0), p(S1), p(P))));
        ops.add(Op.aten("narrow dim 1", call("narrow", "T,i,i,i", null, 1L, 2L, 4L), in(Input.f(5, 7)), fits(p(R), p(S0), p(P))));
        ops.add(Op.aten("slice dim 0 step 2", call("slice", "T,i,i,i,i", null, 0L, 1L, 7L, 2L), in(Input.f(7, 5)), fits(p(R), p(S1), p(P))));
        ops.add(Op.aten("select dim 1 -2", call("select", "T,i,i", null, 1L, -2L), in(Input.f(5, 7)), fits(p(R), p(S0), p(P))));
        ops.add(Op.aten("dropout eval", call("dropout", "T,f,b", null, 0.5, false), in(Input.f(5, 7)), fits(p(R), p(S0), p(S1), p(P))));
        ops.add(Op.aten("cumsum dim 1", call("cumsum", "T,i", null, 1L), in(Input.f(5, 7)), fits(p(R), p(S0), p(P))));
        ops.add(Op.aten("nll_loss_forward mean", call("nll_loss_forward", "T,T,n,i,i", null, null, null, 1L, -100L),
            in(Input.f(6, 5), Input.index(5, 6)), fits(p(R, R), p(S0, S0), p(P, R))));
        ops.add(Op.aten("index_add dim 0", call("index_add", "T,i,T,T", null, 0L, null, null), in(Input.f(7, 3), Input.index(7, 9), Input.f(9, 3)),
            fits(p(R, R, R), p(P, S0, S0), p(S1, R, S1), p(S0, R, R), p(P, R, P))));
        ops.add(Op.aten("tril (fallback)", call("tril", "T,i", null, 1L), in(Input.f(5, 7)), fits(p(R))));
        return ops;
    }

    /** One operator of each family of the strategy table and each hand-written kind: the matrix's smallest cover. */
    static List<Op> onePerFamily() {
        Set<String> seen = new LinkedHashSet<>();
        return ops().stream().filter(o -> seen.add(o.family())).toList();
    }

    /**
     * Operators with dimensions shorter than their split over four devices (a channel count of 3, a kernel of 2): the
     * shards of those dimensions are empty on some devices.
     */
    static List<Op> emptyShardOps() {
        List<Op> ops = new ArrayList<>();
        ops.add(new Op("binary", "add", BinarySpec.ADD, in(Input.f(3, 7), Input.f(3, 7)), t -> List.of(t.get(0).add(t.get(1))), fits(p(S0, S0))));
        ops.add(new Op("reduce", "sum dim 0", new ReduceSpec(ReduceSpec.Kind.SUM, new int[] {0}, false), in(Input.f(2, 5)),
            call("sum", "T|dim=[i]", null, List.of(0L))::call, fits(p(S0))));
        ops.add(Op.aten("mm", call("mm", "T,T", null, null), in(Input.f(3, 2), Input.f(2, 5)), fits(p(S0, R), p(S1, S0))));
        ops.add(Op.aten("softmax dim -1", call("softmax", "T,i", null, -1L), in(Input.f(3, 5)), fits(p(S0))));
        ops.add(Op.aten("layer_norm", call("layer_norm", "T,[i]", null, List.of(5L)), in(Input.f(2, 3, 5)), fits(p(S0), p(S1))));
        ops.add(Op.aten("embedding", call("embedding", "T,T", null, null), in(Input.f(3, 6), Input.index(3, 2, 5)), fits(p(R, S0))));
        ops.add(Op.aten("cat dim 0", call("cat", "[T]|dim=i", Collections.nCopies(2, null), 0L), in(Input.f(2, 5), Input.f(3, 5)),
            fits(p(R, R))));
        ops.add(Op.aten("conv2d", call("conv2d", "T,T", null, null), in(Input.f(2, 3, 6, 5), Input.f(5, 3, 2, 2)), fits(p(S0, R))));
        ops.add(Op.aten("max_pool2d", call("max_pool2d", "T,[i]", null, List.of(2L, 2L)), in(Input.f(2, 3, 6, 5)), fits(p(S0), p(S1))));
        ops.add(Op.aten("scaled_dot_product_attention", call("scaled_dot_product_attention", "T,T,T", null, null, null),
            in(Input.f(2, 3, 5, 4), Input.f(2, 3, 5, 4), Input.f(2, 3, 5, 4)), fits(p(S0, S0, S0), p(S1, S1, S1))));
        ops.add(Op.aten("transpose", call("transpose", "T,i,i", null, 0L, 1L), in(Input.f(3, 5)), fits(p(S0))));
        ops.add(Op.aten("select dim 1", call("select", "T,i,i", null, 1L, 0L), in(Input.f(3, 2)), fits(p(S0))));
        return ops;
    }

    // ---- placements ------------------------------------------------------------------------------------------

    /** Which layouts of an input the matrix draws. */
    enum Shards {
        /** Every shard holds at least one element. */
        NON_EMPTY,
        /** Some shard holds none: a sharded dimension is shorter than the number of its shards. */
        EMPTY,
        /** Either. */
        ANY
    }

    /**
     * Every placement list of {@code input} on a mesh of {@code meshShape}: per mesh dimension R, S(d) for each d, P(sum).
     * The other partial kinds are left out: operators take them through the same moves as P(sum), and partials of
     * different reductions on two mesh dimensions are the planner's subject
     * ({@code ImplicitRedistributionTest.shouldReducePartialValuesOfDifferentReductionsInOneOrder}).
     */
    static List<List<Placement>> layouts(Input input, int[] meshShape, Shards shards) {
        List<Placement> each = new ArrayList<>();
        each.add(R);
        for (int d = 0; d < input.shape().length; d++) {
            each.add(Placement.shard(d));
        }
        if (input.canBePartial()) {
            each.add(P);
        }
        List<List<Placement>> out = new ArrayList<>();
        int[] choice = new int[meshShape.length];
        do {
            List<Placement> layout = new ArrayList<>();
            for (int c : choice) {
                layout.add(each.get(c));
            }
            if (shards == Shards.ANY || hasEmptyShards(input.shape(), layout, meshShape) == (shards == Shards.EMPTY)) {
                out.add(List.copyOf(layout));
            }
        } while (OptionSearch.next(choice, Collections.nCopies(meshShape.length, each)));
        return out;
    }

    /** True when some dimension of {@code shape} is shorter than the number of shards {@code layout} cuts it into. */
    static boolean hasEmptyShards(long[] shape, List<Placement> layout, int[] meshShape) {
        for (int d = 0; d < shape.length; d++) {
            long shards = 1;
            for (int m = 0; m < layout.size(); m++) {
                if (layout.get(m).isShard(d)) {
                    shards *= meshShape[m];
                }
            }
            if (shards > 1 && shape[d] < shards) {
                return true;
            }
        }
        return false;
    }

    /** Every combination of {@code perInput}'s lists (one list of placements per input). */
    static List<List<List<Placement>>> product(List<List<List<Placement>>> perInput) {
        List<List<List<Placement>>> out = new ArrayList<>();
        if (perInput.stream().anyMatch(List::isEmpty)) {
            return out;
        }
        int[] choice = new int[perInput.size()];
        do {
            List<List<Placement>> one = new ArrayList<>();
            for (int i = 0; i < choice.length; i++) {
                one.add(perInput.get(i).get(choice[i]));
            }
            out.add(one);
        } while (OptionSearch.next(choice, perInput));
        return out;
    }

    /** Every combination of every input's layouts of {@code shards} kind. */
    static List<List<List<Placement>>> every(Op op, int[] meshShape, Shards shards) {
        return product(op.inputs().stream().map(i -> layouts(i, meshShape, shards)).toList());
    }

    /**
     * Every combination of every two inputs' non-empty layouts, the other inputs replicated: all pairs, without the full
     * product of three or more inputs. Operators of one or two inputs get their full product.
     */
    static List<List<List<Placement>>> pairs(Op op, int[] meshShape) {
        int n = op.inputs().size();
        if (n <= 2) {
            return every(op, meshShape, Shards.NON_EMPTY);
        }
        Set<List<List<Placement>>> out = new LinkedHashSet<>();
        List<Placement> replicated = Collections.nCopies(meshShape.length, R);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                List<List<List<Placement>>> perInput = new ArrayList<>();
                for (int k = 0; k < n; k++) {
                    perInput.add(k == i || k == j ? layouts(op.inputs().get(k), meshShape, Shards.NON_EMPTY) : List.of(replicated));
                }
                out.addAll(product(perInput));
            }
        }
        return List.copyOf(out);
    }

    /** {@code combos} and the combinations of {@code op}'s {@code mustFit} (on a 1-D mesh) they lack. */
    static List<List<List<Placement>>> withMustFit(Op op, List<List<List<Placement>>> combos) {
        Set<List<List<Placement>>> out = new LinkedHashSet<>(combos);
        for (List<Placement> fit : op.mustFit()) {
            out.add(fit.stream().map(List::of).toList());
        }
        return List.copyOf(out);
    }

    /**
     * A representative sample of the combinations on a mesh of more than one dimension: every input replicated; each
     * input alone in each of its layouts (the others replicated); all inputs alike in each layout they all have; and
     * {@code extra} combinations drawn from the full product with {@code random}.
     */
    static List<List<List<Placement>>> representative(Op op, int[] meshShape, int extra, Random random) {
        int n = op.inputs().size();
        List<Placement> replicated = Collections.nCopies(meshShape.length, R);
        Set<List<List<Placement>>> out = new LinkedHashSet<>();
        out.add(Collections.nCopies(n, replicated));
        List<List<List<Placement>>> perInput = op.inputs().stream().map(i -> layouts(i, meshShape, Shards.NON_EMPTY)).toList();
        for (int i = 0; i < n; i++) {
            for (List<Placement> layout : perInput.get(i)) {
                List<List<Placement>> one = new ArrayList<>(Collections.nCopies(n, replicated));
                one.set(i, layout);
                out.add(one);
            }
        }
        for (List<Placement> layout : perInput.getFirst()) {
            if (perInput.stream().allMatch(l -> l.contains(layout))) {
                out.add(Collections.nCopies(n, layout));
            }
        }
        for (int k = 0; k < extra; k++) {
            List<List<Placement>> one = new ArrayList<>();
            for (List<List<Placement>> l : perInput) {
                one.add(l.get(random.nextInt(l.size())));
            }
            out.add(one);
        }
        return List.copyOf(out);
    }

    // ---- running -------------------------------------------------------------------------------------------

    /** What a run of cases found: how many ran, how many the strict mode refused, and what went wrong. */
    static final class Outcome {
        int cases;
        int refused;
        final List<String> failures = new ArrayList<>();

        void fail(String what) {
            if (failures.size() < LISTED) {
                failures.add(what);
            } else if (failures.size() == LISTED) {
                failures.add("... (more failures not listed)");
            }
        }

        boolean failed() {
            return !failures.isEmpty();
        }

        String report(Op op) {
            return op + ": " + failures.size() + " failure(s) in " + cases + " cases\n  " + String.join("\n  ", failures);
        }
    }

    /**
     * Runs {@code op} on every combination of {@code combos} over a mesh of {@code meshShape} on {@code dt}, against torch
     * on the whole tensors, with implicit redistribution and in the strict mode. A combination listed in {@code op}'s
     * {@code mustFit} (on a 1-D mesh) must run in the strict mode.
     */
    static Outcome run(DTorch dt, Op op, int[] meshShape, List<List<List<Placement>>> combos) {
        Outcome outcome = new Outcome();
        DeviceMesh mesh = dt.initDeviceMesh(meshShape);
        List<Tensor> locals = values(op, 31);
        List<Tensor> expected = op.torchOp().apply(locals);
        try {
            for (List<List<Placement>> placements : combos) {
                outcome.cases++;
                runOne(dt, op, mesh, placements, locals, expected, outcome);
            }
        } finally {
            locals.forEach(Tensor::close);
            expected.forEach(Tensor::close);
        }
        return outcome;
    }

    private static void runOne(DTorch dt, Op op, DeviceMesh mesh, List<List<Placement>> placements, List<Tensor> locals,
                               List<Tensor> expected, Outcome outcome) {
        List<DTensor> inputs = new ArrayList<>();
        String where = placements.toString();
        boolean before = dt.implicitRedistribution();
        try {
            for (int i = 0; i < locals.size(); i++) {
                inputs.add(place(dt, locals.get(i), mesh, placements.get(i)));
            }
            DTensor[] in = inputs.toArray(DTensor[]::new);
            String implicit = compareOutputs(dt.applyMulti(op.spec(), in), expected);
            if (implicit != null) {
                outcome.fail(where + " (implicit): " + implicit);
            }
            List<TensorMeta> metas = inputs.stream().map(DTensor::meta).toList();
            List<List<Placement>> chosen = op.choice().fitsAsTheyAre(metas) ? placements : op.choice().choose(metas).inputs();
            boolean fits = chosen.equals(placements);
            boolean must = mesh.ndim() == 1 && op.mustFit().contains(placements.stream().map(List::getFirst).toList())
                || placements.stream().allMatch(l -> l.stream().allMatch(Placement::isReplicate));
            if (must && !fits) {
                outcome.fail(where + ": the family's rule runs these placements as they are, but the choice moves them to " + chosen);
            }
            dt.setImplicitRedistribution(false);
            String strict = strict(dt, op, in, expected, fits, chosen, outcome);
            if (strict != null) {
                outcome.fail(where + " (strict): " + strict);
            }
        } catch (RuntimeException | AssertionError e) {
            outcome.fail(where + ": " + e.getClass().getSimpleName() + ": " + firstLine(e.getMessage()));
        } finally {
            dt.setImplicitRedistribution(before);
            inputs.forEach(DTensor::close);
        }
    }

    /**
     * {@code op} on {@code inputs} in the strict mode: where they {@code fit}, torch's value; elsewhere a
     * {@link ShardingException} that names their placements. Null when so, else what went wrong.
     */
    private static String strict(DTorch dt, Op op, DTensor[] inputs, List<Tensor> expected, boolean fits, List<List<Placement>> chosen,
                                 Outcome outcome) {
        List<DTensor> outputs;
        try {
            outputs = dt.applyMulti(op.spec(), inputs);
        } catch (ShardingException e) {
            outcome.refused++;
            String named = java.util.Arrays.stream(inputs).map(t -> t.placements().toString()).collect(Collectors.joining(" and "));
            return fits ? "refused placements the choice keeps: " + e.getMessage()
                : e.getMessage().contains(named) ? null : "the refusal does not name the placements: " + e.getMessage();
        }
        if (!fits) {
            compareOutputs(outputs, expected);
            return "ran placements the choice moves to " + chosen;
        }
        return compareOutputs(outputs, expected);
    }

    private static String firstLine(String message) {
        if (message == null) {
            return "";
        }
        int nl = message.indexOf('\n');
        return nl < 0 ? message : message.substring(0, nl);
    }

    /** The outputs against torch's (shape, dtype, values as {@link OperatorsTest#compare}); null when they agree. Closes the outputs. */
    static String compareOutputs(List<DTensor> outputs, List<Tensor> expected) {
        try {
            if (outputs.size() != expected.size()) {
                return outputs.size() + " outputs, torch gives " + expected.size();
            }
            for (int r = 0; r < outputs.size(); r++) {
                DTensor o = outputs.get(r);
                Tensor want = expected.get(r);
                try (Tensor got = o.toTorch()) {
                    if (TorchTensors.dtype(got) != TorchTensors.dtype(want)) {
                        return "output " + r + " is " + TorchTensors.describe(got) + ", torch gives " + TorchTensors.describe(want);
                    }
                    String problem = OperatorsTest.compare(want, got);
                    if (problem != null) {
                        return "output " + r + " (" + o.placements() + "): " + problem;
                    }
                }
            }
            return null;
        } finally {
            outputs.forEach(DTensor::close);
        }
    }

    /** {@code full} on {@code mesh} with {@code placements}; partial placements come from a replicated copy. */
    static DTensor place(DTorch dt, Tensor full, DeviceMesh mesh, List<Placement> placements) {
        Placement[] ps = placements.toArray(Placement[]::new);
        if (placements.stream().noneMatch(Placement::isPartial)) {
            return dt.tensor(full, mesh, ps);
        }
        Placement[] whole = ps.clone();
        for (int m = 0; m < whole.length; m++) {
            whole[m] = whole[m].isPartial() ? R : whole[m];
        }
        try (DTensor d = dt.tensor(full, mesh, whole)) {
            return d.redistribute(ps);
        }
    }

    /** An int64 tensor of {@code values}. */
    private static Tensor longs(long[] values) {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Long))) {
            if (values.length == 0) {
                return torch.zeros(new long[] {0}, options);
            }
            try (LongPointer data = new LongPointer(values); Tensor view = torch.from_blob(data, new long[] {values.length}, options)) {
                return view.clone();
            }
        }
    }

    /** The inputs' values: floats in [0.5, 1.5) (positive, as a variance must be), indices below their bound, random masks. */
    static List<Tensor> values(Op op, long seed) {
        List<Tensor> out = new ArrayList<>();
        try (Generator g = torch.make_generator_cpu(seed)) {
            for (Input in : op.inputs()) {
                try (GeneratorOptional gen = new GeneratorOptional(g)) {
                    if (in.fixed() != null) {
                        out.add(longs(in.fixed()));
                    } else if (in.dtype() == ScalarType.Long) {
                        out.add(torch.randint(0, in.bound(), in.shape(), gen));
                    } else {
                        try (Tensor u = torch.rand(in.shape(), gen); Scalar half = new Scalar(0.5)) {
                            out.add(in.dtype() == ScalarType.Bool ? u.gt(half) : u.add(half));
                        }
                    }
                }
            }
        }
        return out;
    }
}
