package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;

/**
 * Views and shape operators of one tensor (reshape, permute, select, slice, pad, repeat, ...), and what indexing needs
 * besides: {@code index_select}, the scatters that write a slice back ({@code slice_scatter}, {@code select_scatter},
 * {@code index_copy}) and {@code fill} (a tensor of one value in another's shape and placements). Each output element is one input element
 * (or a constant: pad, fill), so a device can compute its shard of the output alone exactly when its input shard holds
 * those input elements; per mesh dimension:
 * <ul>
 *   <li>{@code S(d)} stays a shard, of the output dimension that carries {@code d}, where the operator keeps {@code d}
 *       whole or only moves it (permute, transpose, movedim, unsqueeze, the dimensions select, slice, narrow, pad and
 *       repeat leave alone). Where a reshape merges or splits {@code d}, the shard stays only on the outermost factor
 *       of the merge or split, and only when every device's share is equal on both sides: the sizes of {@code d} and
 *       of the output dimension are divisible by the number of shards of {@code d} (DTorch's shards are
 *       {@code torch.chunk}'s, whose last one may be short; an uneven split would give devices other elements).</li>
 *   <li>Otherwise (a dimension that is sliced, selected, padded, repeated, flipped, or an inner factor of a merge or
 *       split) {@code d} is gathered on that mesh dimension first.</li>
 *   <li>{@code P(op)} passes through: every output element is one input element, so combining partial values commutes
 *       with the operator. Pad and fill write constants, which every device would contribute: {@code P(sum)} passes
 *       only 0, {@code P(product)} only 1. Scatters keep {@code P(op)} only when both tensors have it.</li>
 *   <li>The index of {@code index_select} and {@code index_copy} is replicated: every device needs all of it.</li>
 * </ul>
 * Operators that carry global sizes in their arguments (the shape of reshape and view, the sizes of expand and
 * unflatten) run on each device with the sizes of its own output shard ({@link #kernel}); reshapes of every kind
 * (squeeze, flatten, ...) run locally as {@code aten::reshape} to the local output shape, which gives the same values.
 *
 * <p>Stateless. Thread-safe.
 */
final class ViewStrategy implements ShardingStrategy {
    static final ViewStrategy INSTANCE = new ViewStrategy();

    /** The operators of the family, by name. */
    static final Set<String> NAMES = Set.of("reshape", "view", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze",
        "expand", "permute", "transpose", "swapaxes", "swapdims", "t", "movedim", "moveaxis", "select", "narrow", "slice",
        "constant_pad_nd", "pad", "repeat", "repeat_interleave", "flip", "roll", "index_select", "slice_scatter", "select_scatter", "index_copy",
        "fill", "zero", "alias");
    /** Operators whose output is the input's elements in another shape, in the same order. */
    private static final Set<String> RESHAPES = Set.of("reshape", "view", "_unsafe_view", "flatten", "unflatten", "squeeze",
        "unsqueeze");

    /** Operators whose output has the input's shape. */
    private static final Set<String> SHAPE_KEEPING = Set.of("flip", "roll", "fill", "zero", "alias", "index_copy");

    private ViewStrategy() {
    }

    @Override
    public String family() {
        return "view";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; P(op) (a pad only of op's identity); S(d) where the operator keeps d whole or moves it, "
            + "or where d is the outermost factor of a reshape's merge or split with sizes divisible by the number of shards";
    }

    /**
     * The output shape of the operators libtorch has no meta kernel for: flip, roll and fill keep the input's shape,
     * index_select and repeat_interleave change one dimension's size (or flatten the input).
     */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        String name = call.overload().name();
        long[] shape = inputs.getFirst().shape();
        if (SHAPE_KEEPING.contains(name)) {
            return shape;
        }
        if (name.equals("index_select")) {
            shape[dim(call, "dim", shape.length)] = inputs.get(1).numel();
            return shape;
        }
        if (name.equals("repeat_interleave") && call.constant("repeats") instanceof Long repeats) {
            if (call.constant("dim") == null) {
                return new long[] {inputs.getFirst().numel() * repeats};
            }
            shape[dim(call, "dim", shape.length)] *= repeats;
            return shape;
        }
        return null;
    }

    /** The first input's dtype: every operator of the family gives the elements of its first input, or its fill. */
    @Override
    public ScalarType outputDtype(AtenCall call, List<TensorMeta> inputs) {
        return inputs.getFirst().dtype();
    }

    /** True when this family runs {@code call}: its overloads of one tensor input, index_select and the scatters. */
    static boolean covers(AtenCall call) {
        String name = call.overload().name();
        if (!NAMES.contains(name) || name.equals("view") && !call.overload().overloadName().isEmpty()) {
            return false;
        }
        int inputs = name.equals("index_copy") ? 3 : name.endsWith("_scatter") || name.equals("index_select") ? 2 : 1;
        return call.inputCount() == inputs;
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        long[] out = MetaInference.infer(call, inputs, this).getFirst().shape();
        String name = call.overload().name();
        if (name.endsWith("_scatter") || name.equals("index_copy")) {
            return scatter(call, inputs, outputs);
        }
        TensorMeta t = inputs.getFirst();
        int[] carry = carry(call, t, out);
        boolean reshape = RESHAPES.contains(name);
        List<Placement> in = new ArrayList<>();
        List<Placement> result = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            int d = Rules.shardDim(p);
            boolean keep = d >= 0 ? carry[d] >= 0 && (!reshape || evenlySplit(t, d, out[carry[d]]))
                : p instanceof Partial partial && partialPasses(call, partial.op());
            in.add(keep ? p : Placement.replicate());
            result.add(!keep ? Placement.replicate() : d >= 0 ? Placement.shard(carry[d]) : p);
        }
        List<List<Placement>> ins = new ArrayList<>(List.of(in));
        if (inputs.size() == 2) {
            ins.add(Collections.nCopies(in.size(), Placement.replicate())); // index_select's index: every device needs all of it
        }
        return new Decision(ins, Collections.nCopies(outputs, result));
    }

    /**
     * For each input dimension, the output dimension that carries it so that a shard of it stays a shard (for
     * reshapes: given {@link #evenlySplit}), or -1 when a shard of it must be gathered.
     */
    private static int[] carry(AtenCall call, TensorMeta t, long[] out) {
        int n = t.ndim();
        String name = call.overload().name();
        if (RESHAPES.contains(name)) {
            return reshapeCarry(t.shape(), out);
        }
        int[] carry = identity(n);
        switch (name) {
            case "expand" -> {
                int lead = out.length - n;
                for (int d = 0; d < n; d++) {
                    carry[d] = t.size(d) == out[d + lead] ? d + lead : -1;
                }
            }
            case "permute", "transpose", "swapaxes", "swapdims", "t", "movedim", "moveaxis" -> {
                int[] order = permutation(call, n);
                for (int k = 0; k < n; k++) {
                    carry[order[k]] = k;
                }
            }
            case "select" -> {
                int dim = dim(call, "dim", n);
                for (int d = 0; d < n; d++) {
                    carry[d] = d < dim ? d : d > dim ? d - 1 : -1;
                }
            }
            case "narrow", "slice", "index_select", "repeat_interleave" -> {
                Object dim = call.constant("dim");
                if (dim == null) { // repeat_interleave without dim flattens the tensor
                    Arrays.fill(carry, -1);
                } else {
                    int d = dim(call, "dim", n);
                    carry[d] = name.equals("index_select") || name.equals("repeat_interleave") || t.size(d) != out[d] ? -1 : d;
                }
            }
            case "constant_pad_nd", "pad" -> {
                long[] pad = (long[]) call.constant("pad");
                for (int k = 0; k < pad.length / 2; k++) {
                    if (pad[2 * k] != 0 || pad[2 * k + 1] != 0) {
                        carry[n - 1 - k] = -1;
                    }
                }
            }
            case "repeat" -> {
                long[] repeats = (long[]) call.constant("repeats");
                int lead = repeats.length - n;
                for (int d = 0; d < n; d++) {
                    carry[d] = repeats[d + lead] == 1 ? d + lead : -1;
                }
            }
            case "flip", "roll" -> {
                long[] dims = (long[]) call.constant("dims");
                if (dims.length == 0) { // roll without dims rolls the flattened tensor
                    Arrays.fill(carry, -1);
                }
                for (long d : dims) {
                    carry[Rules.normalizeDim(call.qualifiedName(), Math.toIntExact(d), n)] = -1;
                }
            }
            case "fill", "zero", "alias" -> {
                // every element becomes the value, or stays itself: shards stay where they are
            }
            default -> throw new IllegalStateException(call.qualifiedName() + " is listed as a view but has no rule");
        }
        return carry;
    }

    /**
     * The reshape rule: input and output dimensions fall into groups of equal element counts (walking both shapes
     * from the left); in a group of one dimension of size other than 1 on each side, that dimension is carried whole;
     * in a larger group only the outermost dimension of size other than 1 is carried, to the output's outermost one
     * (subject to {@link #evenlySplit}). A tensor with no elements carries nothing.
     */
    static int[] reshapeCarry(long[] in, long[] out) {
        int[] carry = new int[in.length];
        Arrays.fill(carry, -1);
        if (Arrays.stream(in).anyMatch(s -> s == 0)) {
            return carry;
        }
        int i = 0;
        int j = 0;
        while (i < in.length || j < out.length) {
            int firstIn = -1;
            int firstOut = -1;
            long a = 1;
            long b = 1;
            do {
                if (j >= out.length || i < in.length && a <= b) {
                    firstIn = firstIn < 0 && in[i] != 1 ? i : firstIn;
                    a *= in[i++];
                } else {
                    firstOut = firstOut < 0 && out[j] != 1 ? j : firstOut;
                    b *= out[j++];
                }
            } while (a != b);
            if (firstIn >= 0 && firstOut >= 0) {
                carry[firstIn] = firstOut;
            }
        }
        return carry;
    }

    /**
     * True when the shards of dimension {@code d} stay the same elements once it is merged or split into an output
     * dimension of size {@code outSize}: every device's share is equal on both sides.
     */
    private static boolean evenlySplit(TensorMeta t, int d, long outSize) {
        if (t.size(d) == outSize) {
            return true;
        }
        long shards = 1;
        int[] meshShape = t.sharding().mesh().shape();
        for (int m = 0; m < meshShape.length; m++) {
            if (t.placement(m).isShard(d)) {
                shards *= meshShape[m];
            }
        }
        return t.size(d) % shards == 0 && outSize % shards == 0;
    }

    /** For each output dimension, the input dimension it is, for the operators that only reorder dimensions. */
    static int[] permutation(AtenCall call, int n) {
        String q = call.qualifiedName();
        int[] order = identity(n);
        switch (call.overload().name()) {
            case "permute" -> {
                long[] dims = (long[]) call.constant("dims");
                for (int k = 0; k < n; k++) {
                    order[k] = Rules.normalizeDim(q, Math.toIntExact(dims[k]), n);
                }
            }
            case "t" -> {
                if (n == 2) {
                    order = new int[] {1, 0};
                }
            }
            case "mT", "adjoint" -> { // the last two dimensions swapped
                if (n >= 2) {
                    order[n - 2] = n - 1;
                    order[n - 1] = n - 2;
                }
            }
            case "transpose", "swapaxes", "swapdims" -> {
                String[] names = call.hasParam("axis0") ? new String[] {"axis0", "axis1"} : new String[] {"dim0", "dim1"};
                int a = dim(call, names[0], n);
                int b = dim(call, names[1], n);
                order[a] = b;
                order[b] = a;
            }
            default -> { // movedim, moveaxis: the moved dimensions go to their destinations, the others keep their order
                long[] from = longs(call.constant("source"));
                long[] to = longs(call.constant("destination"));
                Arrays.fill(order, -1);
                boolean[] moved = new boolean[n];
                for (int k = 0; k < from.length; k++) {
                    int s = Rules.normalizeDim(q, Math.toIntExact(from[k]), n);
                    order[Rules.normalizeDim(q, Math.toIntExact(to[k]), n)] = s;
                    moved[s] = true;
                }
                for (int k = 0, next = 0; k < n; k++) {
                    while (order[k] < 0 && moved[next]) {
                        next++;
                    }
                    if (order[k] < 0) {
                        order[k] = next++;
                    }
                }
            }
        }
        return order;
    }

    /**
     * {@code slice_scatter(self, src, dim, ...)}, {@code select_scatter(self, src, dim, index)} and
     * {@code index_copy(self, dim, index, source)} (whose index is replicated).
     */
    private static Decision scatter(AtenCall call, List<TensorMeta> inputs, int outputs) {
        boolean indexed = call.overload().name().equals("index_copy");
        TensorMeta self = inputs.get(0);
        TensorMeta src = inputs.get(indexed ? 2 : 1);
        int n = self.ndim();
        int dim = dim(call, "dim", n);
        boolean select = call.overload().name().equals("select_scatter");
        List<Placement> a = new ArrayList<>();
        List<Placement> b = new ArrayList<>();
        for (int m = 0; m < self.placements().size(); m++) {
            Placement p = self.placement(m);
            Placement q = src.placement(m);
            int d = Rules.shardDim(p);
            int e = Rules.shardDim(q);
            int fromSrc = e < 0 || !select ? e : e < dim ? e : e + 1;
            int k = d >= 0 && d != dim ? d : fromSrc >= 0 && fromSrc != dim ? fromSrc : -1;
            if (k >= 0) {
                a.add(Placement.shard(k));
                b.add(Placement.shard(select && k > dim ? k - 1 : k));
            } else if (p instanceof Partial && p.equals(q)) {
                a.add(p);
                b.add(q);
            } else {
                a.add(Placement.replicate());
                b.add(Placement.replicate());
            }
        }
        List<Placement> index = Collections.nCopies(a.size(), Placement.replicate());
        return new Decision(indexed ? List.of(a, index, b) : List.of(a, b), Collections.nCopies(outputs, a));
    }

    /**
     * Whether {@code P(op)} passes through {@code call}: always, but for a pad or a fill (whose new elements every device
     * would add) by other than op's identity.
     */
    private static boolean partialPasses(AtenCall call, ReduceOpType op) {
        String name = call.overload().name();
        Object mode = call.constant("mode"); // null: the default, "constant"
        boolean constant = name.equals("constant_pad_nd") || name.equals("fill") || name.equals("zero")
            || name.equals("pad") && (mode == null || mode.equals("constant"));
        if (!constant) {
            return true;
        }
        Object v = name.equals("zero") ? Long.valueOf(0) : call.constant("value");
        double value = v == null ? 0 : v instanceof Boolean b ? (b ? 1 : 0) : ((Number) v).doubleValue();
        return switch (op) {
            case SUM -> value == 0;
            case PRODUCT -> value == 1;
            case AVG, MAX, MIN -> true;
        };
    }

    /**
     * What device {@code deviceId} runs where {@code call} carries global sizes: a reshape of any kind runs as
     * {@code aten::reshape} to the device's output shape, {@code expand} takes the device's output shape as its sizes;
     * null (the call itself) for the other operators.
     */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        AtenCall local = localCall(call, op.inputs().getFirst().meta(), op.outputs().getFirst().meta().layout().localShape(deviceId));
        return local == call ? null : (ctx, inputs) -> local.call(inputs);
    }

    /** {@code aten::reshape}, looked up once, when a device first reshapes (libtorch's operators are registered by then). */
    private static final class Reshape {
        static final Overload OVERLOAD = AtenOps.overload("reshape", "");
    }

    private static AtenCall localCall(AtenCall call, TensorMeta input, long[] localOutput) {
        String name = call.overload().name();
        if (name.equals("narrow") && call.overload().overloadName().isEmpty()) {
            // A narrow that keeps its dimension whole keeps that dimension's shards: each device takes all of its own.
            int d = dim(call, "dim", input.ndim());
            boolean sharded = input.placements().stream().anyMatch(p -> p.isShard(d));
            return sharded && isWhole(call, input, d) ? withConstants(call, java.util.Map.of("start", 0L, "length", localOutput[d])) : call;
        }
        if (RESHAPES.contains(name)) {
            return new AtenCall(Reshape.OVERLOAD, List.of(new AtenCall.Input(0), new AtenCall.Constant(localOutput)));
        }
        if (name.equals("expand")) {
            List<AtenCall.Arg> args = new ArrayList<>(call.args());
            List<Overload.Param> params = call.overload().params();
            for (int i = 0; i < params.size(); i++) {
                if (params.get(i).name().equals("size")) {
                    args.set(i, new AtenCall.Constant(localOutput));
                }
            }
            return new AtenCall(call.overload(), args);
        }
        return call;
    }

    /** True when the narrow {@code call} keeps dimension {@code d} of {@code input} whole. */
    private static boolean isWhole(AtenCall call, TensorMeta input, int d) {
        Object length = call.constant("length");
        return length instanceof Number n && n.longValue() == input.size(d);
    }

    /** {@code call} with the constants named in {@code values} replaced. */
    private static AtenCall withConstants(AtenCall call, java.util.Map<String, Object> values) {
        List<AtenCall.Arg> args = new ArrayList<>(call.args());
        List<Overload.Param> params = call.overload().params();
        for (int i = 0; i < params.size(); i++) {
            Object v = values.get(params.get(i).name());
            if (v != null) {
                args.set(i, new AtenCall.Constant(v));
            }
        }
        return new AtenCall(call.overload(), args);
    }

    private static int dim(AtenCall call, String param, int n) {
        return Rules.normalizeDim(call.qualifiedName(), Math.toIntExact(((Number) call.constant(param)).longValue()), n);
    }

    private static long[] longs(Object value) {
        return value instanceof long[] l ? l : new long[] {((Number) value).longValue()};
    }

    private static int[] identity(int n) {
        int[] out = new int[n];
        Arrays.setAll(out, k -> k);
        return out;
    }
}
