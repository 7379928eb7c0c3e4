package org.dtorch.core.kernel;

import java.util.Arrays;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Copies a distributed tensor into another one of the same global shape (DTorch's {@code CopyKernel}):
 * on the same mesh with the same placements every device runs {@code copy_}; otherwise the source is
 * redistributed (through collectives and, across meshes, the operation's {@code TensorStore}) and written
 * into the destination's local tensors.
 *
 * <p>Thread-safe: immutable; each device calls {@link #run} on its own thread.
 */
public final class CopyKernel {
    private final Sharding destination;
    private final Sharding source;
    private final ConvertKernel convert;

    /** A copy from {@code source} into {@code destination}, tensors of {@code globalShape}. */
    public CopyKernel(Sharding destination, Sharding source, long[] globalShape) {
        this.destination = Objects.requireNonNull(destination, "destination");
        this.source = Objects.requireNonNull(source, "source");
        this.convert = destination.equals(source) ? null : ConvertKernel.of(source, destination, globalShape);
    }

    /**
     * Runs this device's part.
     *
     * @param destinationLocal this device's destination tensor, or null if it is not in the destination mesh
     * @param sourceLocal      this device's source tensor, or null if it is not in the source mesh
     */
    public void run(KernelContext ctx, Tensor destinationLocal, Tensor sourceLocal) {
        if (convert == null) {
            if (destinationLocal == null || sourceLocal == null) {
                throw new IllegalArgumentException("CopyKernel on " + ctx.device() + ": both tensors are on " + destination
                    + ", so the device needs both (got " + TorchTensors.describe(destinationLocal) + " and "
                    + TorchTensors.describe(sourceLocal) + ")");
            }
            if (!Arrays.equals(TorchTensors.shape(destinationLocal), TorchTensors.shape(sourceLocal))) {
                throw new IllegalArgumentException("CopyKernel on " + ctx.device() + ": cannot copy " + TorchTensors.describe(sourceLocal)
                    + " into " + TorchTensors.describe(destinationLocal));
            }
            destinationLocal.copy_(sourceLocal);
            return;
        }
        boolean inDestination = destination.mesh().contains(ctx.deviceId());
        if (inDestination != (destinationLocal != null)) {
            throw new IllegalArgumentException("CopyKernel on " + ctx.device() + ": " + (inDestination
                ? "the device is in the destination mesh but got no destination tensor"
                : "the device is not in the destination mesh but got a destination tensor"));
        }
        convert.run(ctx, sourceLocal, destinationLocal);
    }
}
