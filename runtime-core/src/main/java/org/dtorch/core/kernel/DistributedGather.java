package org.dtorch.core.kernel;

import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.Sharding;

/**
 * A distributed tensor becomes a full tensor on one device (DTorch's {@code GatherTensor}): partial
 * values are reduced first, then every shard travels once, through the operation's {@code TensorStore},
 * to the holder, which assembles them.
 *
 * <p>Thread-safe: immutable; each device calls {@link #run} on its own thread.
 */
public final class DistributedGather {
    private final ConvertKernel convert;

    /** Gathers a tensor of {@code globalShape} under {@code source} onto {@code holderDevice}. */
    public DistributedGather(Sharding source, long holderDevice, long[] globalShape) {
        Objects.requireNonNull(source, "source");
        this.convert = ConvertKernel.of(source, Sharding.wholeOn(source.mesh().kind(), holderDevice), globalShape);
    }

    /**
     * Runs this device's part: devices of the source mesh pass their shard, the holder (if not one of
     * them) null.
     *
     * @return the full tensor on the holder, null elsewhere
     */
    public Tensor run(KernelContext ctx, Tensor localShard) {
        return convert.run(ctx, localShard);
    }
}
