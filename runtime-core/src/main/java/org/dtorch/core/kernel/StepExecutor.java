package org.dtorch.core.kernel;

import java.util.List;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.RedistributionStep;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Runs the steps of a plan on one device of a mesh: each step is one collective of this device's group
 * along the step's mesh dimension, or a local move.
 *
 * <p>Not thread-safe: one device thread per call.
 */
final class StepExecutor {

    private StepExecutor() {
    }

    /**
     * Runs {@code steps} on {@code input}. Returns {@code input} itself when there are no steps, else a new
     * tensor; intermediate tensors are closed.
     */
    static Tensor run(KernelContext ctx, DeviceMesh mesh, List<RedistributionStep> steps, Tensor input) {
        Tensor current = input;
        for (RedistributionStep step : steps) {
            Tensor next = step(ctx, mesh, step, current);
            if (current != input) {
                current.close();
            }
            current = next;
        }
        return current;
    }

    private static Tensor step(KernelContext ctx, DeviceMesh mesh, RedistributionStep step, Tensor x) {
        long device = ctx.deviceId();
        int meshDim = step.meshDim();
        int parts = mesh.size(meshDim);
        int coordinate = mesh.coordinates(device)[meshDim];
        long[] after = step.after().localShape(device);
        return switch (step.kind()) {
            case ALL_GATHER -> {
                int dim = ((Shard) step.from()).dim();
                yield RankOrderGather.gather(ctx.groupAlong(mesh, meshDim), x, dim, after[dim]);
            }
            case ALL_TO_ALL -> {
                int src = ((Shard) step.from()).dim();
                int dest = ((Shard) step.to()).dim();
                yield ctx.groupAlong(mesh, meshDim).allToAll(x, src, dest, after[src]);
            }
            case REDUCE_SCATTER -> ctx.groupAlong(mesh, meshDim)
                .reduceScatterTensor(x, ((Shard) step.to()).dim(), ((Partial) step.from()).op());
            case ALL_REDUCE -> ctx.groupAlong(mesh, meshDim).allReduce(x, ((Partial) step.from()).op());
            case LOCAL_SLICE -> {
                int dim = ((Shard) step.to()).dim();
                long size = x.size(dim);
                try (Tensor part = x.narrow(dim, BalancedSplit.offset(size, parts, coordinate), BalancedSplit.size(size, parts, coordinate))) {
                    yield part.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
                }
            }
            case REPLICATE_TO_PARTIAL -> {
                if (coordinate == 0) {
                    yield x.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
                }
                try (Scalar identity = PartialValues.identity(((Partial) step.to()).op(), TorchTensors.dtype(x))) {
                    yield torch.full(after, identity, x.options());
                }
            }
            case SHARD_TO_PARTIAL -> {
                int dim = ((Shard) step.from()).dim();
                try (Scalar identity = PartialValues.identity(((Partial) step.to()).op(), TorchTensors.dtype(x))) {
                    Tensor full = torch.full(after, identity, x.options());
                    try (Tensor mine = full.narrow(dim, BalancedSplit.offset(after[dim], parts, coordinate), x.size(dim))) {
                        mine.copy_(x);
                    }
                    yield full;
                }
            }
        };
    }
}
