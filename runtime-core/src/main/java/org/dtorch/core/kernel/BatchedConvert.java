package org.dtorch.core.kernel;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ReductionWork;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionStep;
import org.dtorch.core.distributed.StepKind;
import org.dtorch.core.graph.DeviceKernel;

/**
 * Several redistributions run by one operator on one device (the inputs an operator needs moved). Those that are one
 * {@code P(sum) -> R} all-reduce on the same mesh dimension go together through {@code ThreadGroup.allReduceSum_}, so
 * that every reduction is submitted before any is awaited (TeleFuser's {@code all_reduce_sum_}), instead of every
 * device waiting for the first before it issues the second; each runs on a contiguous copy of its input, which becomes
 * its result. The others run through their {@link ConvertKernel}, one after the other, after the batches. Every device
 * runs the same order.
 *
 * <p>Thread-safe: immutable; each device calls {@link #run} on its own thread.
 */
public final class BatchedConvert {
    private final List<ConvertKernel> kernels;
    /** Indices of the kernels reduced together, per mesh and mesh dimension; batches of two or more unless lone sums join. */
    private final Map<GroupKey, List<Integer>> sums;

    private record GroupKey(DeviceMesh mesh, int meshDim) {
    }

    /** The redistributions of {@code kernels}, in order; a lone sum on its group runs through its {@link ConvertKernel}. */
    public BatchedConvert(List<ConvertKernel> kernels) {
        this(kernels, false);
    }

    /**
     * The redistributions of {@code kernels}, in order. With {@code loneSumsToo} a sum that is alone on its group goes
     * through {@code ThreadGroup.allReduceSumAsync_} as well: the gradients' buckets of a backward pass, whose sums must
     * be computed the same way (and issued in the background) whether a bucket holds one gradient or several.
     */
    public BatchedConvert(List<ConvertKernel> kernels, boolean loneSumsToo) {
        this.kernels = List.copyOf(Objects.requireNonNull(kernels, "kernels"));
        Map<GroupKey, List<Integer>> byGroup = new LinkedHashMap<>();
        for (int i = 0; i < this.kernels.size(); i++) {
            RedistributionStep step = singleSum(this.kernels.get(i).plan());
            if (step != null) {
                byGroup.computeIfAbsent(new GroupKey(this.kernels.get(i).plan().source().mesh(), step.meshDim()), k -> new ArrayList<>()).add(i);
            }
        }
        byGroup.values().removeIf(indices -> indices.size() < (loneSumsToo ? 1 : 2));
        this.sums = byGroup;
    }

    /** The plan's only step when it is a {@code P(sum) -> R} all-reduce on its own mesh and device kind; else null. */
    private static RedistributionStep singleSum(RedistributionPlan plan) {
        if (plan.throughDevice().isPresent() || plan.transfer().isPresent() || plan.sourceSteps().size() != 1) {
            return null;
        }
        RedistributionStep step = plan.sourceSteps().getFirst();
        boolean sum = step.kind() == StepKind.ALL_REDUCE && step.from() instanceof Partial p && p.op() == ReduceOpType.SUM;
        return sum ? step : null;
    }

    /** The number of redistributions submitted together on some device: for tests and messages. */
    public int batched() {
        return sums.values().stream().mapToInt(List::size).sum();
    }

    /**
     * Runs this device's part of every redistribution.
     *
     * @param inputs this device's local tensor of each source, or null where the device is not in its mesh
     * @return one new tensor per redistribution, or null where the device is not in its target mesh
     */
    public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
        DeviceKernel.Issued issued = issue(ctx, inputs);
        if (issued.completion() != null) {
            try {
                issued.completion().run();
            } catch (RuntimeException e) {
                closeAll(issued.outputs());
                throw e;
            }
        }
        return issued.outputs();
    }

    /**
     * {@link #run}, with the batched all-reduces issued and not awaited where the group's backend runs them in the
     * background ({@link ThreadGroup#allReduceSumAsync_}): the returned completion awaits them, in the order they were
     * issued, and names the reductions that failed. The other redistributions run before this returns.
     */
    public DeviceKernel.Issued issue(KernelContext ctx, List<Tensor> inputs) {
        if (inputs.size() != kernels.size()) {
            throw new IllegalArgumentException("BatchedConvert on " + ctx.device() + ": " + inputs.size() + " inputs for "
                + kernels.size() + " redistributions");
        }
        Tensor[] out = new Tensor[kernels.size()];
        boolean[] done = new boolean[kernels.size()];
        List<ReductionWork> inFlight = new ArrayList<>();
        try {
            for (Map.Entry<GroupKey, List<Integer>> batch : sums.entrySet()) {
                List<Integer> indices = batch.getValue();
                indices.forEach(i -> done[i] = true);
                if (!batch.getKey().mesh().contains(ctx.deviceId())) {
                    continue;
                }
                for (int i : indices) {
                    out[i] = inputs.get(i).clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
                }
                inFlight.add(ctx.groupAlong(batch.getKey().mesh(), batch.getKey().meshDim())
                    .allReduceSumAsync_(indices.stream().map(i -> out[i]).toArray(Tensor[]::new)));
            }
            for (int i = 0; i < kernels.size(); i++) {
                if (!done[i]) {
                    out[i] = kernels.get(i).run(ctx, inputs.get(i));
                }
            }
        } catch (RuntimeException e) {
            awaitQuietly(inFlight); // c10d writes into the outputs until its work is done
            closeAll(Arrays.asList(out));
            throw e;
        }
        inFlight.removeIf(ReductionWork::isDone);
        return new DeviceKernel.Issued(Arrays.asList(out), inFlight.isEmpty() ? null : () -> awaitAll(inFlight));
    }

    /** Awaits every reduction, each even after one failed (each releases its buffers), and throws the first failure. */
    private static void awaitAll(List<ReductionWork> works) {
        RuntimeException first = null;
        for (ReductionWork work : works) {
            try {
                work.await();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    private static void awaitQuietly(List<ReductionWork> works) {
        try {
            awaitAll(works);
        } catch (RuntimeException ignored) {
            // the caller reports the failure that stopped the kernel
        }
    }

    private static void closeAll(List<Tensor> tensors) {
        for (Tensor t : tensors) {
            if (t != null) {
                t.close();
            }
        }
    }
}
