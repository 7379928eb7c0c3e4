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
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionStep;
import org.dtorch.core.distributed.StepKind;

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
    /** Indices of the kernels reduced together, per mesh and mesh dimension; only batches of two or more. */
    private final Map<GroupKey, List<Integer>> sums;

    private record GroupKey(DeviceMesh mesh, int meshDim) {
    }

    /** The redistributions of {@code kernels}, in order. */
    public BatchedConvert(List<ConvertKernel> kernels) {
        this.kernels = List.copyOf(Objects.requireNonNull(kernels, "kernels"));
        Map<GroupKey, List<Integer>> byGroup = new LinkedHashMap<>();
        for (int i = 0; i < this.kernels.size(); i++) {
            RedistributionStep step = singleSum(this.kernels.get(i).plan());
            if (step != null) {
                byGroup.computeIfAbsent(new GroupKey(this.kernels.get(i).plan().source().mesh(), step.meshDim()), k -> new ArrayList<>()).add(i);
            }
        }
        byGroup.values().removeIf(indices -> indices.size() < 2);
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
        if (inputs.size() != kernels.size()) {
            throw new IllegalArgumentException("BatchedConvert on " + ctx.device() + ": " + inputs.size() + " inputs for "
                + kernels.size() + " redistributions");
        }
        Tensor[] out = new Tensor[kernels.size()];
        boolean[] done = new boolean[kernels.size()];
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
                ctx.groupAlong(batch.getKey().mesh(), batch.getKey().meshDim())
                    .allReduceSum_(indices.stream().map(i -> out[i]).toArray(Tensor[]::new));
            }
            for (int i = 0; i < kernels.size(); i++) {
                if (!done[i]) {
                    out[i] = kernels.get(i).run(ctx, inputs.get(i));
                }
            }
        } catch (RuntimeException e) {
            for (Tensor t : out) {
                if (t != null) {
                    t.close();
                }
            }
            throw e;
        }
        return Arrays.asList(out);
    }
}
