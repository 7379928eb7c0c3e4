package org.dtorch.ops;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.CopyKernel;
import org.dtorch.core.kernel.KernelContext;

/**
 * {@code dst.copy_(src)}: writes {@code src} into {@code dst} in place, converting the dtype; {@code src} is
 * redistributed to {@code dst}'s sharding on the way if they differ (the explicit request is the copy
 * itself). Inputs are {@code [dst, src]}; there is no new output, {@code dst}'s tensors change. A partial
 * destination takes another dtype only where the cast commutes with its reduction, as {@link CastSpec}.
 *
 * <p>Thread-safe: immutable.
 */
public final class CopySpec implements OpSpec {
    public static final CopySpec INSTANCE = new CopySpec();
    private static final List<Integer> FIRST = List.of(0);

    private CopySpec() {
    }

    @Override
    public String name() {
        return "copy_";
    }

    @Override
    public boolean communicates() {
        return true;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 2);
        TensorMeta dst = inputs.get(0);
        TensorMeta src = inputs.get(1);
        if (!Arrays.equals(dst.shape(), src.shape())) {
            throw new IllegalArgumentException("copy_: cannot copy " + src + " into " + dst + ": shapes differ");
        }
        // The source arrives in the destination's placements and each device converts its part.
        Rules.checkPartialCast(name(), inputs, new TensorMeta(dst.shape(), src.dtype(), dst.sharding()), dst.dtype());
        new CopyKernel(dst.sharding(), src.sharding(), dst.shape());
        return List.of();
    }

    /** As {@link RedistributeSpec#runsOnHostMeshes}: between a CPU and a CUDA mesh, or within one CPU sharding. */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return HostMeshes.movesBetweenKindsOrStays(op.inputs().get(1).meta().sharding(), op.inputs().get(0).meta().sharding());
    }

    /** The move of the source to the destination's sharding, if they differ. */
    @Override
    public List<RedistributionPlan> redistributions(Operator op) {
        TensorMeta dst = op.inputs().get(0).meta();
        TensorMeta src = op.inputs().get(1).meta();
        return dst.sharding().equals(src.sharding()) ? List.of()
            : List.of(RedistributionPlanner.plan(src.sharding(), dst.sharding(), dst.shape()));
    }

    /** The tensor written: the first input. */
    @Override
    public List<Integer> writtenInputs(Operator op) {
        return FIRST;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta dst = op.inputs().get(0).meta();
        TensorMeta src = op.inputs().get(1).meta();
        CopyKernel copy = new CopyKernel(dst.sharding(), src.sharding(), dst.shape());
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                copy.run(ctx, inputs.get(0), inputs.get(1));
                return List.of();
            }
        };
    }
}
