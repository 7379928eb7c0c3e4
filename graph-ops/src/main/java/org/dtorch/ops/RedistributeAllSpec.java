package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.BatchedConvert;
import org.dtorch.core.kernel.ConvertKernel;
import org.dtorch.core.kernel.KernelContext;

/**
 * Several inputs moved in one operator, input {@code i} to {@code targets[i]}: the moves an operator needs before it
 * runs. Run by {@link BatchedConvert}, which submits the {@code P(sum) -> R} all-reduces on one group together
 * ({@code ThreadGroup.allReduceSumAsync_}, awaited where a later operator reads the results) and runs the other moves
 * as {@link RedistributeSpec} would. Plans are checked
 * when the operator is created, in the client's thread.
 *
 * <p>Thread-safe: immutable.
 */
public final class RedistributeAllSpec implements OpSpec {
    private final List<Sharding> targets;
    /** The operator whose inputs these implicit moves prepare, or null. */
    private final String implicitFor;
    /** True for a bucket of gradients: a lone sum is reduced as a bucket's sums are (see {@link #gradientBucket}). */
    private final boolean gradientBucket;

    /** Moves of as many inputs as {@code targets}, in order. */
    public RedistributeAllSpec(List<Sharding> targets) {
        this(targets, null);
    }

    /**
     * Moves of as many inputs as {@code targets}, in order, that the runtime inserts for operator {@code implicitFor}
     * (null: moves the program asked for), named as {@link RedistributeSpec#implicit} names them.
     */
    public RedistributeAllSpec(List<Sharding> targets, String implicitFor) {
        this(targets, implicitFor, false);
    }

    private RedistributeAllSpec(List<Sharding> targets, String implicitFor, boolean gradientBucket) {
        this.targets = List.copyOf(Objects.requireNonNull(targets, "targets"));
        this.implicitFor = implicitFor;
        this.gradientBucket = gradientBucket;
    }

    /**
     * The moves of a bucket of gradients to their leaves' placements: every {@code P(sum) -> R} among them, a lone one
     * too, runs through the group's bucketed in-place reduction, issued in the background, so that a gradient is summed
     * the same way whichever bucket of a backward pass it falls in.
     */
    public static RedistributeAllSpec gradientBucket(List<Sharding> targets) {
        return new RedistributeAllSpec(targets, null, true);
    }

    /** True for the moves of a bucket of gradients ({@link #gradientBucket}). */
    public boolean isGradientBucket() {
        return gradientBucket;
    }

    @Override
    public String name() {
        return RedistributeSpec.implicitName("redistribute", implicitFor);
    }

    /** The operator these implicit moves prepare the inputs of, or null. */
    public String implicitFor() {
        return implicitFor;
    }

    @Override
    public boolean communicates() {
        return true;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, targets.size());
        List<TensorMeta> outputs = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMeta t = inputs.get(i);
            RedistributionPlanner.plan(t.sharding(), targets.get(i), t.shape());
            outputs.add(t.withSharding(targets.get(i)));
        }
        return outputs;
    }

    /** As {@link RedistributeSpec#runsOnHostMeshes}, for every input. */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        for (int i = 0; i < targets.size(); i++) {
            if (!HostMeshes.movesBetweenKindsOrStays(op.inputs().get(i).meta().sharding(), targets.get(i))) {
                return false;
            }
        }
        return true;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        List<ConvertKernel> kernels = new ArrayList<>(targets.size());
        for (int i = 0; i < targets.size(); i++) {
            TensorMeta input = op.inputs().get(i).meta();
            kernels.add(ConvertKernel.of(input.sharding(), targets.get(i), input.shape()));
        }
        BatchedConvert batched = new BatchedConvert(kernels, gradientBucket);
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                return batched.run(ctx, inputs);
            }

            /** The all-reduces run while the device goes on with later operators (see {@link BatchedConvert#issue}). */
            @Override
            public Issued issue(KernelContext ctx, List<Tensor> inputs) {
                return batched.issue(ctx, inputs);
            }
        };
    }

    List<Sharding> targets() {
        return targets;
    }
}
