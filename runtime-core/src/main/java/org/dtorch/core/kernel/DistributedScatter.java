package org.dtorch.core.kernel;

import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.Sharding;

/**
 * A full tensor held by one device becomes a distributed tensor (DTorch's {@code ScatherTensor}): every
 * device of the target mesh receives, through the operation's {@code TensorStore}, only its own shard.
 * Partial placements are created as in {@code R -> P}: one holder keeps the value, the others the
 * identity.
 *
 * <p>Thread-safe: immutable; each device calls {@link #run} on its own thread.
 */
public final class DistributedScatter {
    private final ConvertKernel convert;

    /** Scatters a tensor of {@code globalShape} held by {@code holderDevice} to {@code target}. */
    public DistributedScatter(long holderDevice, Sharding target, long[] globalShape) {
        Objects.requireNonNull(target, "target");
        this.convert = ConvertKernel.of(Sharding.wholeOn(target.mesh().kind(), holderDevice), target, globalShape);
    }

    /**
     * Runs this device's part: the holder passes the full tensor, every other device null.
     *
     * @return this device's shard, or null if it is not in the target mesh
     */
    public Tensor run(KernelContext ctx, Tensor fullOnHolder) {
        return convert.run(ctx, fullOnHolder);
    }
}
