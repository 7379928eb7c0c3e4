package org.dtorch.core.runtime.process;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.distributed.Sharding;

/**
 * What an {@link OpSpecCodec} writes through: the wire primitives, shardings, tensors, and promises (by
 * their serialized names).
 *
 * <p>Not thread-safe: one thread writes one operator.
 */
public final class SpecWriter {
    private final WireWriter out;
    private final String sharedNamePrefix;
    private int tensors;

    SpecWriter(WireWriter out, String sharedNamePrefix) {
        this.out = out;
        this.sharedNamePrefix = sharedNamePrefix;
    }

    /** The wire primitives. */
    public WireWriter wire() {
        return out;
    }

    /** A sharding: mesh and placements. */
    public SpecWriter sharding(Sharding sharding) {
        MetaCodec.writeSharding(out, sharding);
        return this;
    }

    /** A File promise of {@code type}, by its serialized (shared-memory) name; the worker completes it. */
    public SpecWriter promise(TensorPromiseType type, String serialized) {
        if (type != TensorPromiseType.FILE) {
            throw new IllegalArgumentException("a promise that crosses to a worker process must be a FILE promise, got " + type);
        }
        out.putString(serialized);
        return this;
    }

    /** A CPU tensor's values; large ones through shared memory that lives until the operator ran everywhere. */
    public SpecWriter tensor(Tensor value) {
        out.putTensor(value, sharedNamePrefix + "-t" + tensors++);
        return this;
    }
}
