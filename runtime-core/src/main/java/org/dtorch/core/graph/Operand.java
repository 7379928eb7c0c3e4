package org.dtorch.core.graph;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A global tensor of the graph: an id and its metadata. The client's handle, every operator that reads or
 * writes it, and nothing else hold it; each holder counts in {@link #uses}, and when the count reaches
 * zero the runtime forgets the operand entirely.
 *
 * <p>Thread-safe: the id and metadata are immutable; the use count is atomic.
 */
public final class Operand {
    private final long id;
    private final TensorMeta meta;
    /** The client handle (1 until released) plus one per operator not yet run that reads or writes this operand. */
    private final AtomicInteger uses = new AtomicInteger(1);

    Operand(long id, TensorMeta meta) {
        this.id = id;
        this.meta = Objects.requireNonNull(meta, "meta");
    }

    /** An operand rebuilt in a worker process from its id and metadata; only the per-device-process runtime calls it. */
    public static Operand remote(long id, TensorMeta meta) {
        return new Operand(id, meta);
    }

    /** The operand's id, unique within its runtime. */
    public long id() {
        return id;
    }

    /** Shape, dtype and sharding. */
    public TensorMeta meta() {
        return meta;
    }

    void retain() {
        uses.incrementAndGet();
    }

    /** Drops one use; true when it was the last. */
    boolean releaseUse() {
        return uses.decrementAndGet() == 0;
    }

    @Override
    public String toString() {
        return "%" + id + " " + meta;
    }
}
