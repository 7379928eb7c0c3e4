package org.dtorch.core.graph;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Objects;

/**
 * A global tensor of the graph: an id and its metadata. The client's handle, every operator that reads or
 * writes it, and nothing else hold it; each holder counts in {@link #uses}, and when the count reaches
 * zero the runtime forgets the operand entirely.
 *
 * <p>Thread-safe: the id and metadata are immutable; the use count is atomic.
 */
public final class Operand {
    private static final VarHandle USES;

    static {
        try {
            USES = MethodHandles.lookup().findVarHandle(Operand.class, "uses", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long id;
    private final TensorMeta meta;
    /**
     * The client handle (1 until released) plus one per operator not yet run that reads or writes this operand;
     * changed atomically through {@link #USES} (a field, not an {@code AtomicInteger}: one object less per operand
     * for the threads that read it).
     */
    @SuppressWarnings("unused")
    private volatile int uses = 1;

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
        USES.getAndAdd(this, 1);
    }

    /** Drops one use; true when it was the last. */
    boolean releaseUse() {
        return (int) USES.getAndAdd(this, -1) == 1;
    }

    @Override
    public String toString() {
        return "%" + id + " " + meta;
    }
}
