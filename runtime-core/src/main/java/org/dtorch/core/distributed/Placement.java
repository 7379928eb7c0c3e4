package org.dtorch.core.distributed;

import org.dtorch.core.communication.ReduceOpType;

/**
 * How a tensor is laid out along one mesh dimension: {@link Shard}, {@link Replicate} or {@link Partial}.
 * A sequence of placements, one per mesh dimension, describes a distributed tensor.
 *
 * <p>Thread-safe: placements are immutable values.
 */
public sealed interface Placement permits Shard, Replicate, Partial {

    /** {@code S(dim)}. */
    static Shard shard(int dim) {
        return new Shard(dim);
    }

    /** {@code R}. */
    static Replicate replicate() {
        return Replicate.INSTANCE;
    }

    /** {@code P(sum)}. */
    static Partial partial() {
        return new Partial(ReduceOpType.SUM);
    }

    /** {@code P(op)}. */
    static Partial partial(ReduceOpType op) {
        return new Partial(op);
    }

    /** True for {@code S(d)} of any d. */
    default boolean isShard() {
        return this instanceof Shard;
    }

    /** True for {@code S(dim)}. */
    default boolean isShard(int dim) {
        return this instanceof Shard s && s.dim() == dim;
    }

    /** True for {@code P(op)} of any op. */
    default boolean isPartial() {
        return this instanceof Partial;
    }

    /** True for {@code R}. */
    default boolean isReplicate() {
        return this instanceof Replicate;
    }
}
