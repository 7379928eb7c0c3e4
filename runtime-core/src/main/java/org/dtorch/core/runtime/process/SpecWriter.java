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

    /** Writes to {@code out}; large tensors go to shared memory named from {@code sharedNamePrefix}, inline when null. */
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

    /**
     * A promise the worker completes, by its type and serialized form: a File promise (its shared-memory name) for a
     * worker of this host, a Network one (its store's address and key) for a worker on another node.
     */
    public SpecWriter promise(TensorPromiseType type, String serialized) {
        if (type == TensorPromiseType.MEMORY) {
            throw new IllegalArgumentException("a promise that crosses to a worker process must be a FILE or NETWORK promise, got " + type);
        }
        out.putInt(type.ordinal());
        out.putString(serialized);
        return this;
    }

    /** A CPU tensor's values; large ones through shared memory that lives until the operator ran everywhere. */
    public SpecWriter tensor(Tensor value) {
        out.putTensor(value, sharedNamePrefix == null ? null : sharedNamePrefix + "-t" + tensors++);
        return this;
    }
}
