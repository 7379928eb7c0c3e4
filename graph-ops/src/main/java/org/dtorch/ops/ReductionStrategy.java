package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.PartialValues;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * Reductions of one tensor over dimensions ({@code dim}: an int, a list, or None/empty for all; {@code keepdim}). Per
 * mesh dimension:
 * <ul>
 *   <li>{@code S(d)} on a kept dimension stays a shard, of {@code d}'s index in the result;</li>
 *   <li>{@code S(d)} on a reduced dimension gives {@code P(op)} where the reduction is the all-reduce {@code op}
 *       itself ({@code sum}, {@code nansum}, {@code count_nonzero} give {@code P(sum)}, {@code amax} and {@code max}
 *       over everything {@code P(max)}, {@code amin} and {@code min} {@code P(min)}, {@code prod} {@code P(product)});
 *       otherwise ({@code mean}, {@code var}, {@code std}, {@code norm}, {@code argmax}, {@code max.dim}, ...) the
 *       input is gathered to {@code R} on that mesh dimension first, so the reduction sees whole rows: exact, at the
 *       cost of an all-gather ({@code mean} is not summed and divided, which would be exact too but needs a second
 *       operator);</li>
 *   <li>{@code P(op)} stays {@code P(op)} when the reduction is {@code op} of the values (a sum of partial sums; not
 *       {@code count_nonzero}), else it is reduced to {@code R} first;</li>
 *   <li>{@code R} stays {@code R}.</li>
 * </ul>
 *
 * <p>A device whose shard of a reduced dimension is empty contributes the reduction's identity to the partial result:
 * 0 to a sum, 1 to a product, {@code -inf} (the dtype's least value for integers, false for booleans) to a maximum and
 * {@code +inf} (the greatest value, true) to a minimum, as libtorch's own sum and product of nothing do; its
 * {@code amax}, {@code amin} and {@code max} refuse an empty dimension, so the kernel makes the identity itself.
 *
 * <p>Stateless. Thread-safe.
 */
final class ReductionStrategy implements ShardingStrategy {
    static final ReductionStrategy INSTANCE = new ReductionStrategy();

    /** Reductions that are the all-reduce of their partial results, by qualified name or name. */
    private static final Map<String, ReduceOpType> LINEAR = Map.ofEntries(
        Map.entry("sum", ReduceOpType.SUM), Map.entry("nansum", ReduceOpType.SUM), Map.entry("count_nonzero", ReduceOpType.SUM),
        Map.entry("amax", ReduceOpType.MAX), Map.entry("amin", ReduceOpType.MIN), Map.entry("prod", ReduceOpType.PRODUCT),
        Map.entry("aten::max", ReduceOpType.MAX), Map.entry("aten::min", ReduceOpType.MIN));

    private ReductionStrategy() {
    }

    @Override
    public String family() {
        return "reduction";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; S(d) on a kept dimension; S(d) on a reduced dimension only for sum, nansum, count_nonzero, "
            + "amax, amin, prod and max/min over everything; P(op) only for the reduction op itself";
    }

    /** The all-reduce that combines partial results of {@code call}, or null when there is none. */
    static ReduceOpType partialOp(AtenCall call) {
        ReduceOpType op = LINEAR.get(call.qualifiedName());
        return op != null ? op : LINEAR.get(call.overload().name());
    }

    /** Which of {@code ndim} dimensions {@code call} reduces. */
    static boolean[] reduced(AtenCall call, int ndim) {
        Object dim = call.hasParam("dim") ? call.constant("dim") : null;
        boolean[] out = new boolean[ndim];
        long[] dims = dim == null ? new long[0] : dim instanceof long[] l ? l : new long[] {((Number) dim).longValue()};
        if (dims.length == 0) {
            java.util.Arrays.fill(out, true);
        }
        for (long d : dims) {
            int k = Rules.normalizeDim(call.qualifiedName(), Math.toIntExact(d), Math.max(ndim, 1));
            if (ndim > 0) {
                out[k] = true;
            }
        }
        return out;
    }

    static boolean keepdim(AtenCall call) {
        return Boolean.TRUE.equals(call.constant("keepdim"));
    }

    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        if (inputs.size() != 1) {
            return null;
        }
        TensorMeta t = inputs.getFirst();
        boolean[] reduced = reduced(call, t.ndim());
        boolean keepdim = keepdim(call);
        List<Long> shape = new ArrayList<>();
        for (int d = 0; d < t.ndim(); d++) {
            if (!reduced[d] || keepdim) {
                shape.add(reduced[d] ? 1L : t.size(d));
            }
        }
        return shape.stream().mapToLong(Long::longValue).toArray();
    }

    /**
     * Where {@code op} is a reduction into partial values and device {@code deviceId}'s input shard is empty but its
     * outputs are not (the shard of a reduced dimension is empty), a kernel that gives the identity of the reduction;
     * null elsewhere (the call itself).
     */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        ReduceOpType partial = partialOp(call);
        if (partial == null || op.inputs().size() != 1 || op.inputs().getFirst().meta().layout().localNumel(deviceId) != 0) {
            return null;
        }
        List<TensorMeta> outputs = op.outputs().stream().map(o -> o.meta()).toList();
        if (outputs.stream().anyMatch(o -> o.layout().localNumel(deviceId) == 0)) {
            return null;
        }
        return (ctx, inputs) -> outputs.stream()
            .map(o -> identity(partial, o.layout().localShape(deviceId), o.dtype(), inputs.getFirst())).toList();
    }

    /** A tensor of {@code shape} and {@code dtype} on {@code like}'s device filled with the identity of {@code op}. */
    static Tensor identity(ReduceOpType op, long[] shape, ScalarType dtype, Tensor like) {
        try (Scalar value = PartialValues.identity(op, dtype);
             TensorOptions options = like.options().dtype(new ScalarTypeOptional(dtype))) {
            return torch.full(shape, value, options);
        }
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        if (inputs.size() != 1) {
            return ReplicateStrategy.INSTANCE.decide(call, inputs, outputs);
        }
        TensorMeta t = inputs.getFirst();
        return reduce(call.qualifiedName(), t, reduced(call, t.ndim()), keepdim(call), partialOp(call), outputs);
    }

    /**
     * The cheapest placements of a reduction of {@code t} over the dimensions {@code reduced} whose partial results
     * combine with {@code op} (null where they do not): the hand-written reductions of the Java API share this rule.
     * Per mesh dimension the options are {@code R}; {@code S(d)} on a kept dimension, giving the shard of its new index;
     * {@code S(d)} on a reduced dimension, giving {@code P(op)}, where {@code op} is not null; and {@code P(op)} kept.
     */
    static Decision reduce(String name, TensorMeta t, boolean[] reduced, boolean keepdim, ReduceOpType op, int outputs) {
        int[] newIndex = new int[t.ndim()];
        for (int d = 0, next = 0; d < t.ndim(); d++) {
            newIndex[d] = !reduced[d] || keepdim ? next++ : -1;
        }
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            List<Option> dim = new ArrayList<>();
            dim.add(new Option(List.of(Placement.replicate()), Placement.replicate()));
            int ways = t.sharding().mesh().size(m);
            for (int d = 0; d < t.ndim(); d++) {
                if (t.size(d) < ways && !t.placement(m).isShard(d)) {
                    continue; // a dimension shorter than the split would leave devices idle
                }
                if (!reduced[d]) {
                    dim.add(new Option(List.of(Placement.shard(d)), Placement.shard(newIndex[d])));
                } else if (op != null) {
                    dim.add(new Option(List.of(Placement.shard(d)), Placement.partial(op)));
                }
            }
            // A partial input passes through a reduction of its own values (a sum of partial sums), never through
            // count_nonzero, which counts the parts' non-zeros rather than the sum's.
            if (op != null && !name.contains("count_nonzero") && t.placement(m) instanceof Partial partial && partial.op() == op) {
                dim.add(new Option(List.of(partial), partial));
            }
            options.add(dim);
        }
        return OptionSearch.cheapest(name, List.of(t), options, outputs);
    }
}
