package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * The negative log-likelihood losses and their derivatives: {@code nll_loss_forward}, {@code nll_loss2d_forward} (the
 * loss and the total weight), {@code nll_loss}, {@code nll_loss_nd}, {@code nll_loss2d}, {@code cross_entropy_loss}, and
 * {@code nll_loss_backward}, {@code nll_loss2d_backward}. The input is {@code (N, C, d1, ...)} (or {@code (C)}), the
 * class indices {@code (N, d1, ...)}; {@code cross_entropy_loss} also takes class probabilities of the input's shape.
 * Each target element reads its own row of the input, so per mesh dimension:
 * <ul>
 *   <li>the input {@code S(d)} on a dimension other than the classes, with the target sharded on the same dimension
 *       (and the class weights {@code R}), runs on each device's rows: without reduction the loss is {@code S} like the
 *       target; a sum is {@code P(sum)}, and so is the total weight; a mean is {@code P(sum)} of each device's sum
 *       divided by the global total weight, which the kernel all-reduces (one number) over the mesh dimensions that split
 *       the rows, so the mean is exact where ignored targets or class weights make the devices' counts differ (class
 *       probabilities divide by the global element count, which needs no communication); the total weight is then
 *       {@code R}. The derivative, given the global total weight ({@code R}) and the output gradient ({@code R}, or
 *       sharded like the target without reduction), gives the input's gradient on the input's shards;</li>
 *   <li>the input {@code P(sum)} with {@code R} target and weights stays {@code P(sum)} for the negative log-likelihood,
 *       which is linear in the input (not for {@code cross_entropy_loss}, whose softmax is not); the derivative is
 *       linear in the output gradient, which passes {@code P(sum)} the same way;</li>
 *   <li>the input {@code S} on the class dimension (the logits of loss parallelism) with {@code R} target, weights and
 *       total weight stays, for the negative log-likelihood: each device picks the targets among its classes
 *       ({@link ClassShard}), so the loss is {@code P(sum)} (a mean divides by the total weight of all classes, which
 *       every device knows from the whole targets) and the derivative is {@code S} on the classes; not for
 *       {@code nll_loss_forward} without reduction, whose total weight the devices cannot tell apart from libtorch's, nor
 *       for {@code cross_entropy_loss}, whose softmax needs every class;</li>
 *   <li>otherwise every input is {@code R}.</li>
 * </ul>
 * The reduction is the schema's {@code reduction}: 0 none, 1 mean, 2 sum.
 *
 * <p>Stateless. Thread-safe.
 */
final class LossStrategy implements ShardingStrategy {
    static final LossStrategy INSTANCE = new LossStrategy();

    /** The forward losses. */
    static final Set<String> FORWARD = Set.of("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd", "nll_loss2d",
        "cross_entropy_loss");
    /** Their derivatives with respect to the input. */
    static final Set<String> BACKWARD = Set.of("nll_loss_backward", "nll_loss2d_backward");

    private static final long NONE = 0;
    private static final long MEAN = 1;
    private static final long SUM = 2;

    private LossStrategy() {
    }

    @Override
    public String family() {
        return "loss";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; the input S(d) off the class dimension with the target sharded on the same dimension and "
            + "the class weights, the total weight and a reduced output gradient R; for the negative log-likelihood the input "
            + "(forward) or the output gradient (backward) P(sum) with the others R, or the input S on the class dimension with "
            + "the others R";
    }

    private static long reduction(AtenCall call) {
        Object r = call.constant("reduction");
        return r == null ? MEAN : ((Number) r).longValue();
    }

    private static boolean isBackward(AtenCall call) {
        return BACKWARD.contains(call.overload().name());
    }

    /**
     * The output's shape, for the losses libtorch has no meta kernel for ({@code nll_loss2d}, {@code nll_loss_nd} and
     * {@code cross_entropy_loss} over more than two dimensions, {@code nll_loss2d_backward}): the input's for a derivative;
     * for a loss without reduction the target's (class probabilities: the input's without the class dimension), else a
     * scalar. Null for {@code nll_loss2d_forward}, whose two outputs have different shapes without reduction.
     */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        String name = call.overload().name();
        if (name.equals("nll_loss2d_forward")) {
            return null;
        }
        if (isBackward(call)) {
            return inputs.get(1).shape();
        }
        if (reduction(call) != NONE) {
            return new long[0];
        }
        TensorMeta self = inputs.get(0);
        TensorMeta target = inputs.get(1);
        if (target.ndim() != self.ndim() || self.ndim() < 2) {
            return target.shape();
        }
        long[] out = new long[self.ndim() - 1];
        for (int d = 0, k = 0; d < self.ndim(); d++) {
            if (d != 1) {
                out[k++] = self.size(d);
            }
        }
        return out;
    }

    /** The input's dtype: the loss and the input's gradient are of the input's dtype. */
    @Override
    public ScalarType outputDtype(AtenCall call, List<TensorMeta> inputs) {
        return inputs.get(isBackward(call) ? 1 : 0).dtype();
    }

    /** The forward's mean over sharded rows divides by a total weight every device must know: the kernel all-reduces it. */
    @Override
    public boolean communicates(AtenCall call) {
        return !isBackward(call) && reduction(call) == MEAN;
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        boolean backward = isBackward(call);
        int first = backward ? 1 : 0; // the input's position: after the output gradient in a derivative
        TensorMeta self = inputs.get(first);
        TensorMeta target = inputs.get(first + 1);
        long reduction = reduction(call);
        boolean linear = !call.overload().name().equals("cross_entropy_loss");
        boolean probabilities = target.ndim() == self.ndim() && self.ndim() > 0 && !backward;
        int classDim = self.ndim() >= 2 ? 1 : 0;
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < self.placements().size(); m++) {
            List<Option> dim = new ArrayList<>();
            dim.add(new Option(all(inputs.size(), Placement.replicate()), Placement.replicate()));
            int ways = self.sharding().mesh().size(m);
            for (int d = 0; d < self.ndim() && self.ndim() >= 2; d++) {
                if (d == classDim || self.size(d) < ways && !self.placement(m).isShard(d)) {
                    continue; // a dimension shorter than the split would leave devices idle
                }
                Placement rows = Placement.shard(d);
                // the loss of each position has the input's dimensions without the classes; so have class indices
                Placement positions = Placement.shard(d < classDim ? d : d - 1);
                Placement targetRows = probabilities ? rows : positions;
                List<Placement> in = all(inputs.size(), Placement.replicate());
                in.set(first, rows);
                in.set(first + 1, targetRows);
                if (backward) {
                    in.set(0, reduction == NONE ? targetRows : Placement.replicate());
                    dim.add(new Option(in, rows));
                } else {
                    dim.add(new Option(in, reduction == NONE ? positions : Placement.partial()));
                }
            }
            if (linear) {
                List<Placement> in = all(inputs.size(), Placement.replicate());
                in.set(backward ? 0 : first, Placement.partial());
                dim.add(new Option(in, Placement.partial()));
            }
            boolean twoOutputsUnreduced = !backward && reduction == NONE && outputs == 2;
            if (linear && !probabilities && self.ndim() > 0 && !twoOutputsUnreduced
                && (self.size(classDim) >= ways || self.placement(m).isShard(classDim))) {
                // Each device picks the targets among its classes; the others pick nothing there.
                List<Placement> in = all(inputs.size(), Placement.replicate());
                in.set(first, Placement.shard(classDim));
                dim.add(new Option(in, backward ? Placement.shard(classDim) : Placement.partial()));
            }
            options.add(dim);
        }
        Decision d = OptionSearch.cheapest(call.qualifiedName(), inputs, options, 1);
        if (outputs == 1) {
            return d;
        }
        // The total weight: summed where the rows are split, but whole once the mean has all-reduced it; a partial
        // input or split classes leave it whole, since every device sees every target of its rows.
        List<Placement> total = new ArrayList<>();
        for (int m = 0; m < self.placements().size(); m++) {
            Placement in = d.inputs().get(first).get(m);
            boolean splitRows = in.isShard() && !in.isShard(classDim);
            total.add(splitRows && reduction != MEAN ? Placement.partial() : Placement.replicate());
        }
        return new Decision(d.inputs(), List.of(d.outputs().getFirst(), total));
    }

    private static List<Placement> all(int n, Placement p) {
        List<Placement> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(p);
        }
        return out;
    }

    /**
     * A forward mean whose input rows are split over some mesh dimensions: each device's sum divided by the global
     * total weight ({@link MeanOverRows}); null elsewhere (the call on the local shards is the answer).
     */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        boolean backward = isBackward(call);
        TensorMeta self = op.inputs().get(backward ? 1 : 0).meta();
        int classDim = self.ndim() >= 2 ? 1 : 0;
        Object ignoreGiven = call.constant("ignore_index");
        long ignore = ignoreGiven == null ? -100 : ((Number) ignoreGiven).longValue();
        boolean weighted = call.inputNames().contains("weight");
        List<Integer> split = new ArrayList<>();
        boolean classesSplit = false;
        for (int m = 0; m < self.placements().size(); m++) {
            classesSplit |= self.ndim() > 0 && self.placement(m).isShard(classDim);
            if (self.placement(m).isShard() && !self.placement(m).isShard(classDim)) {
                split.add(m);
            }
        }
        if (classesSplit) {
            long reduction = reduction(call);
            return new ClassShard(withConstants(call, backward || reduction != MEAN ? reduction : SUM, -1L), backward, reduction,
                classDim, self.layout().offsets(deviceId)[classDim], self.layout().localShape(deviceId)[classDim], ignore, weighted,
                self.sharding().mesh(), split.stream().mapToInt(Integer::intValue).toArray(), op.outputs().size() == 2);
        }
        if (!communicates(call)) {
            return null;
        }
        if (split.isEmpty()) {
            return null;
        }
        TensorMeta target = op.inputs().get(1).meta();
        boolean probabilities = target.ndim() == self.ndim();
        long count = 1;
        for (int d = 0; d < self.ndim(); d++) {
            count *= d == 1 ? 1 : self.size(d);
        }
        return new MeanOverRows(withConstants(call, SUM, null), self.sharding().mesh(), split.stream().mapToInt(Integer::intValue).toArray(),
            probabilities, count, ignore, weighted, op.outputs().size() == 2);
    }

    /** {@code call} with its reduction and (where not null) its ignored index replaced. */
    private static AtenCall withConstants(AtenCall call, long reduction, Long ignore) {
        List<AtenCall.Arg> args = new ArrayList<>(call.args());
        for (int i = 0; i < args.size(); i++) {
            String name = call.overload().params().get(i).name();
            if (name.equals("reduction")) {
                args.set(i, new AtenCall.Constant(reduction));
            } else if (ignore != null && name.equals("ignore_index")) {
                args.set(i, new AtenCall.Constant(ignore));
            }
        }
        return new AtenCall(call.overload(), args);
    }

    /**
     * The loss, or its derivative, on a device that holds classes {@code [first, first + cols)}: the targets among them
     * are shifted to local classes, every other target (and every ignored one) becomes the ignored index -1 of
     * {@code localCall}, and the class weights are cut to the device's classes. A forward mean divides the device's sum
     * by the total weight of its rows' targets over all classes, all-reduced over the mesh dimensions {@code rowSplit}
     * that split the rows; that total is the second output of {@code nll_loss_forward}.
     */
    private record ClassShard(AtenCall localCall, boolean backward, long reduction, int classDim, long first, long cols, long ignore,
                              boolean weighted, DeviceMesh mesh, int[] rowSplit, boolean totalOutput) implements DeviceKernel {
        @Override
        public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
            int at = backward ? 1 : 0;
            Tensor self = inputs.get(at);
            Tensor target = inputs.get(at + 1);
            Tensor weight = weighted ? inputs.get(at + 2) : null;
            List<Tensor> local = new ArrayList<>(inputs);
            try (Scalar offset = new Scalar(first); Scalar zero = new Scalar(0L); Scalar end = new Scalar(cols); Scalar skip = new Scalar(ignore);
                 Scalar none = new Scalar(-1L); Tensor shifted = target.sub(offset); Tensor low = shifted.ge(zero); Tensor high = shifted.lt(end);
                 Tensor kept = target.ne(skip); Tensor inRange = low.logical_and(high); Tensor mine = inRange.logical_and(kept);
                 Tensor others = mine.logical_not(); Tensor classes = shifted.masked_fill(others, none);
                 Tensor weights = weighted ? weight.narrow(0, first, cols) : null) {
                local.set(at + 1, classes);
                if (weighted) {
                    local.set(at + 2, weights);
                }
                if (backward) {
                    return cols == 0 ? List.of(torch.zeros_like(self)) : localCall.call(local);
                }
                Tensor loss = lossOf(local, self, target);
                if (reduction != MEAN && !totalOutput) {
                    return List.of(loss);
                }
                Tensor total = MeanOverRows.totalWeight(target, weight, ignore, self.scalar_type());
                if (reduction == MEAN && rowSplit.length > 0) {
                    try (Tensor partial = total) {
                        total = ctx.groupOver(mesh, rowSplit).allReduce(partial);
                    }
                }
                if (reduction == MEAN) {
                    try (Tensor sum = loss) {
                        loss = sum.div(total);
                    }
                }
                if (totalOutput) {
                    return List.of(loss, total);
                }
                total.close();
                return List.of(loss);
            }
        }

        /** The device's part of the loss: the call on its classes, or zeros where it holds none. */
        private Tensor lossOf(List<Tensor> local, Tensor self, Tensor target) {
            if (cols == 0) {
                long[] shape = reduction == NONE ? TorchTensors.shape(target) : new long[0];
                return torch.zeros(shape, self.options());
            }
            List<Tensor> out = localCall.call(local);
            for (int i = 1; i < out.size(); i++) {
                out.get(i).close();
            }
            return out.getFirst();
        }
    }

    /**
     * The mean loss on one device whose rows are part of the batch: its rows' sum ({@code sumCall}) divided by the
     * total weight of every device's rows, which one all-reduce over the mesh dimensions {@code split} gives (for class
     * probabilities, the global element count over the classes instead). With {@code totalOutput}, the second output is
     * that total weight.
     */
    private record MeanOverRows(AtenCall sumCall, DeviceMesh mesh, int[] split, boolean probabilities, long count, long ignore,
                                boolean weighted, boolean totalOutput) implements DeviceKernel {
        @Override
        public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
            List<Tensor> sums = sumCall.call(inputs);
            try (Tensor sum = sums.getFirst()) {
                if (probabilities) {
                    try (Scalar n = new Scalar((double) count)) {
                        return List.of(sum.div(n));
                    }
                }
                Tensor local = totalOutput ? sums.get(1) : totalWeight(inputs.get(1), weighted ? inputs.get(2) : null, ignore, sum.scalar_type());
                try (local) {
                    Tensor total = ctx.groupOver(mesh, split).allReduce(local);
                    Tensor loss = sum.div(total);
                    if (totalOutput) {
                        return List.of(loss, total);
                    }
                    total.close();
                    return List.of(loss);
                }
            }
        }

        /** The weight of the targets that are not {@code ignore}: their count, or the sum of their classes' weights. */
        static Tensor totalWeight(Tensor target, Tensor weight, long ignore, ScalarType dtype) {
            try (Scalar skip = new Scalar(ignore); Tensor kept = target.ne(skip)) {
                if (weight == null) {
                    try (Tensor count = kept.sum()) {
                        return count.to(dtype);
                    }
                }
                try (Tensor classes = target.masked_select(kept); Tensor weights = weight.index_select(0, classes);
                     ScalarTypeOptional as = new ScalarTypeOptional(dtype)) {
                    return weights.sum(as);
                }
            }
        }
    }
}
