package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code sum}, {@code mean} and {@code max} (values, as {@code amax}) over dimensions, with
 * {@code keepdim}. No dimensions means all of them. {@code mean} needs a floating-point tensor; {@code sum}
 * of integers gives int64.
 *
 * <p>Sharding rule, per mesh dimension: {@code R -> R}; {@code S(d)} on a kept dimension stays a shard (of
 * that dimension's new index); {@code S(d)} on a reduced dimension gives {@code P(sum)} for sum and mean
 * (the mean divides by the global count) and {@code P(max)} for max; {@code P(sum)} stays {@code P(sum)}
 * for sum and mean; {@code P(max)} stays {@code P(max)} for max.
 *
 * <p>Thread-safe: immutable.
 */
public final class ReduceSpec implements OpSpec, ShardsPassThrough {
    /** The reductions. */
    public enum Kind { SUM, MEAN, MAX }

    private final Kind kind;
    /** The operator's name, as every trace span and profile row of it reads it. */
    private final String name;
    private final int[] dims;
    private final boolean keepdim;

    /** A reduction over {@code dims} (all if empty). */
    public ReduceSpec(Kind kind, int[] dims, boolean keepdim) {
        this.kind = Objects.requireNonNull(kind, "kind");
        this.name = kind.name().toLowerCase(java.util.Locale.ROOT);
        this.dims = Objects.requireNonNull(dims, () -> name + ": dims is null").clone();
        this.keepdim = keepdim;
    }

    @Override
    public String name() {
        return name;
    }

    private long[] reducedDims(int ndim) {
        TreeSet<Integer> set = new TreeSet<>();
        if (dims.length == 0) {
            for (int d = 0; d < ndim; d++) {
                set.add(d);
            }
        } else {
            for (int d : dims) {
                if (!set.add(Rules.normalizeDim(name(), d, ndim))) {
                    throw new IllegalArgumentException(name() + ": dimension " + d + " appears twice in " + Arrays.toString(dims));
                }
            }
        }
        return set.stream().mapToLong(Integer::longValue).toArray();
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        if (kind == Kind.MEAN && !Rules.isFloating(t.dtype())) {
            throw new IllegalArgumentException("mean needs a floating-point tensor, got " + t + "; convert it with to(dtype) first");
        }
        long[] reduced = reducedDims(t.ndim());
        boolean[] isReduced = new boolean[t.ndim()];
        for (long d : reduced) {
            isReduced[(int) d] = true;
            if (kind == Kind.MAX && t.size((int) d) == 0) {
                // As torch's amax: a maximum of nothing has no value (an empty shard of a longer dimension is fine).
                throw new IllegalArgumentException("max: dimension " + d + " of " + t + " has no element, so it has no maximum");
            }
        }
        int[] newIndex = new int[t.ndim()];
        List<Long> shape = new ArrayList<>();
        for (int d = 0, next = 0; d < t.ndim(); d++) {
            if (!isReduced[d] || keepdim) {
                shape.add(isReduced[d] ? 1L : t.size(d));
                newIndex[d] = next++;
            } else {
                newIndex[d] = -1;
            }
        }
        ReduceOpType partialOp = kind == Kind.MAX ? ReduceOpType.MAX : ReduceOpType.SUM;
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            int d = Rules.shardDim(p);
            if (p.isReplicate()) {
                out.add(p);
            } else if (d >= 0) {
                out.add(isReduced[d] ? Placement.partial(partialOp) : Placement.shard(newIndex[d]));
            } else if (p instanceof Partial partial && partial.op() == partialOp) {
                out.add(p);
            } else {
                throw Rules.reject(name(), inputs, m, "a " + name() + " of partial values " + p + " is not their " + name(),
                    "S, R, or " + Placement.partial(partialOp));
            }
        }
        ScalarType dtype = kind == Kind.SUM && !Rules.isFloating(t.dtype()) ? ScalarType.Long : t.dtype();
        return List.of(new TensorMeta(shape.stream().mapToLong(Long::longValue).toArray(), dtype, Rules.sharding(t.sharding().mesh(), out)));
    }

    /**
     * The reduction rule's cheapest placements ({@link ReductionStrategy#reduce}): a sum or mean of shards of a reduced
     * dimension gives {@code P(sum)} (the mean divides by the global count), a max {@code P(max)}.
     */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        boolean[] isReduced = new boolean[t.ndim()];
        for (long d : reducedDims(t.ndim())) {
            isReduced[(int) d] = true;
        }
        return ReductionStrategy.reduce(name(), t, isReduced, keepdim, kind == Kind.MAX ? ReduceOpType.MAX : ReduceOpType.SUM, 1);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta input = op.inputs().getFirst().meta();
        long[] reduced = reducedDims(input.ndim());
        long count = 1;
        for (long d : reduced) {
            count *= input.size((int) d);
        }
        long globalCount = count;
        TensorMeta output = op.outputs().getFirst().meta();
        ScalarType dtype = output.dtype();
        if (kind == Kind.MEAN && globalCount == 0) {
            // torch's mean over no element is NaN (0 / 0); a partial sum of the devices' NaN parts is NaN too.
            long[] shape = output.layout().localShape(deviceId);
            return new LocalKernel(in -> {
                try (Scalar nan = new Scalar(Double.NaN); ScalarTypeOptional type = new ScalarTypeOptional(dtype);
                     TensorOptions options = in.getFirst().options().dtype(type)) {
                    return torch.full(shape, nan, options);
                }
            });
        }
        if (input.layout().localNumel(deviceId) == 0 && output.layout().localNumel(deviceId) != 0) {
            // An empty shard of a reduced dimension: this device's partial value is the reduction's identity (libtorch's
            // amax refuses an empty dimension; its sum gives 0, which a mean then divides by the global count).
            long[] shape = output.layout().localShape(deviceId);
            ReduceOpType identity = kind == Kind.MAX ? ReduceOpType.MAX : ReduceOpType.SUM;
            return new LocalKernel(in -> ReductionStrategy.identity(identity, shape, dtype, in.getFirst()));
        }
        return new LocalKernel(in -> {
            Tensor t = in.getFirst();
            return switch (kind) {
                case SUM -> t.sum(reduced, keepdim, new ScalarTypeOptional(dtype));
                case MAX -> t.amax(reduced, keepdim);
                case MEAN -> {
                    try (Tensor sum = t.sum(reduced, keepdim, new ScalarTypeOptional(dtype)); Scalar n = new Scalar((double) globalCount)) {
                        yield sum.div(n);
                    }
                }
            };
        });
    }

    public Kind kind() {
        return kind;
    }

    public int[] dims() {
        return dims.clone();
    }

    public boolean keepdim() {
        return keepdim;
    }
}
