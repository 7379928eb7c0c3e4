package org.dtorch.core.kernel;

import java.util.Arrays;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.CrossMeshTransfer;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Moves a distributed tensor to another sharding, on the same mesh or onto another one (DTorch's
 * {@code ConvertKernel}: {@code ConvertPlacements} and {@code ConvertDeviceMesh}). Every device of either
 * mesh calls {@link #run} with the same plan.
 *
 * <p>Between a CPU mesh and a CUDA mesh the kernel runs the plan between their CUDA twins
 * ({@link RedistributionPlan#throughDevice()}), moving a host input to its worker's GPU before it, or the result to
 * the host after it; the moves are copies on the worker's stream, synchronous with the host. Every step is then one
 * the CUDA runtime already runs, and the CPU side never communicates.
 *
 * <p>Thread-safe: the kernel is immutable; each device calls {@link #run} on its own thread.
 */
public final class ConvertKernel {
    private final RedistributionPlan plan;
    private final ShardLayout sourceLayout;
    /** Between device kinds: the kernel of the plan between the CUDA twins; else null. */
    private final ConvertKernel throughDevice;

    /** A kernel for a planned redistribution. */
    public ConvertKernel(RedistributionPlan plan) {
        this.plan = Objects.requireNonNull(plan, "plan");
        this.sourceLayout = ShardLayout.of(plan.globalShape(), plan.source());
        this.throughDevice = plan.throughDevice().map(ConvertKernel::new).orElse(null);
    }

    /** Plans (cached) and builds a kernel; fails before any communication if the request is invalid. */
    public static ConvertKernel of(Sharding source, Sharding target, long[] globalShape) {
        return new ConvertKernel(RedistributionPlanner.plan(source, target, globalShape));
    }

    /** The plan this kernel executes. */
    public RedistributionPlan plan() {
        return plan;
    }

    /**
     * Runs this device's part.
     *
     * @param input this device's local tensor under the source sharding, or null if it is not in the source mesh
     * @return a new local tensor under the target sharding, or null if this device is not in the target mesh
     */
    public Tensor run(KernelContext ctx, Tensor input) {
        return run(ctx, input, null);
    }

    /**
     * As {@link #run(KernelContext, Tensor)}, writing the result into {@code into} (this device's tensor of
     * the target's local shape) when given; returns {@code into} then.
     */
    Tensor run(KernelContext ctx, Tensor input, Tensor into) {
        long device = ctx.deviceId();
        boolean inSource = plan.source().mesh().contains(device);
        boolean inTarget = plan.target().mesh().contains(device);
        checkInput(ctx, inSource, inTarget, input);
        if (throughDevice != null) {
            return runThroughDevice(ctx, input, into, inTarget);
        }
        Tensor staged = inSource ? StepExecutor.run(ctx, plan.source().mesh(), plan.sourceSteps(), input) : null;
        try {
            CrossMeshTransfer transfer = plan.transfer().orElse(null);
            if (transfer == null) {
                // No step: the result is the input's memory, as PyTorch DTensor's redistribute returns the local tensor
                // itself when nothing moves (a tensor of its own, so that in-place view changes stay apart).
                return finish(staged == input ? input.alias() : staged, into);
            }
            boolean direct = into != null && plan.targetSteps().isEmpty();
            Tensor moved = TransferExecutor.run(ctx, transfer, staged, direct ? into : null);
            if (!inTarget || direct) {
                return moved;
            }
            Tensor result = StepExecutor.run(ctx, plan.target().mesh(), plan.targetSteps(), moved);
            if (result != moved) {
                moved.close();
            }
            return finish(result, into);
        } finally {
            if (staged != null && staged != input && plan.transfer().isPresent()) {
                staged.close();
            }
        }
    }

    /**
     * A move between device kinds: the host input goes to the worker's GPU, the twin plan runs there, and a
     * result for a CPU target comes back to the host. The GPU copies are closed here.
     */
    private Tensor runThroughDevice(KernelContext ctx, Tensor input, Tensor into, boolean inTarget) {
        Device gpu = ctx.stream().device();
        if (gpu.kind() != DeviceKind.CUDA) {
            throw new IllegalStateException("ConvertKernel on " + ctx.device() + ": a move between " + plan.source().mesh() + " and "
                + plan.target().mesh() + " needs a worker on a GPU, but its stream is " + ctx.stream());
        }
        boolean toHost = plan.target().mesh().kind() == DeviceKind.CPU;
        Tensor onGpu = input == null || input.is_cuda() ? input : TorchTensors.to(input, gpu);
        try {
            Tensor result = throughDevice.run(ctx, onGpu, toHost ? null : into);
            if (!inTarget || !toHost) {
                return result;
            }
            try (result) {
                if (into != null) {
                    into.copy_(result);
                    return into;
                }
                return TorchTensors.to(result, Device.cpu(0));
            }
        } finally {
            if (onGpu != null && onGpu != input) {
                onGpu.close();
            }
        }
    }

    private static Tensor finish(Tensor result, Tensor into) {
        if (into == null) {
            return result;
        }
        try (result) {
            into.copy_(result);
        }
        return into;
    }

    private void checkInput(KernelContext ctx, boolean inSource, boolean inTarget, Tensor input) {
        if (!inSource && !inTarget) {
            throw new IllegalArgumentException(where(ctx) + ": the device is in neither " + plan.source().mesh() + " nor " + plan.target().mesh());
        }
        if (inSource != (input != null)) {
            throw new IllegalArgumentException(where(ctx) + ": " + (inSource ? "the device is in the source mesh but got no input"
                : "the device is not in the source mesh but got an input"));
        }
        if (input != null && !sourceLayout.isLocalShapeOf(ctx.deviceId(), input)) {
            throw new IllegalArgumentException(where(ctx) + ": the input is " + TorchTensors.describe(input) + " but the device's shard of "
                + Arrays.toString(plan.globalShape()) + " is " + Arrays.toString(sourceLayout.localShape(ctx.deviceId())));
        }
    }

    /** The kernel and device an error names; built only for an error, since every move checks its input. */
    private String where(KernelContext ctx) {
        return "ConvertKernel on " + ctx.device() + " (" + plan.source().placements() + " -> " + plan.target().placements() + ")";
    }
}
