package org.dtorch.core.graph;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Objects;

/**
 * A global tensor of the graph: an id and its metadata. The client's handle, every operator that reads or
 * writes it, and nothing else hold it; each holder counts in {@link #uses}, and when the count reaches
 * zero the runtime forgets the operand entirely.
 *
 * <p>An <em>alias</em> ({@link GraphConstructor#alias}) is another operand, its root, under other metadata whose local
 * tensors are the root's on every device (placements that differ only on mesh dimensions of one device): no operator
 * makes it. It has the root's id, so devices find the root's tensors and failures under it, and the root's counts: an
 * operator that reads it holds the root, and the root's tensors live until the root's client handle and every alias's
 * are released ({@link #handles}). Operators that read it see its metadata, as the client inferred them with.
 *
 * <p>Thread-safe: the id, metadata and root are immutable; the counts are atomic.
 */
public final class Operand {
    private static final VarHandle USES;
    private static final VarHandle HANDLES;

    static {
        try {
            USES = MethodHandles.lookup().findVarHandle(Operand.class, "uses", int.class);
            HANDLES = MethodHandles.lookup().findVarHandle(Operand.class, "handles", int.class);
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
    /** The operand whose device tensors these are: this one, or the operand an alias views. */
    private final Operand root;
    /**
     * A root's client handles not yet released: its own and one per alias of it; changed atomically through
     * {@link #HANDLES}. The client's use ({@link #uses}) is released when it reaches zero.
     */
    @SuppressWarnings("unused")
    private volatile int handles = 1;

    Operand(long id, TensorMeta meta) {
        this.id = id;
        this.meta = Objects.requireNonNull(meta, "meta");
        this.root = this;
    }

    private Operand(TensorMeta meta, Operand root) {
        this.id = root.id;
        this.meta = Objects.requireNonNull(meta, "meta");
        this.root = root;
    }

    /** An alias of {@code root}'s tensors under {@code meta}, holding one more client handle of the root. */
    static Operand alias(TensorMeta meta, Operand root) {
        HANDLES.getAndAdd(root, 1);
        return new Operand(meta, root);
    }

    /** An operand rebuilt in a worker process from its id and metadata; only the per-device-process runtime calls it. */
    public static Operand remote(long id, TensorMeta meta) {
        return new Operand(id, meta);
    }

    /** The operand's id, unique within its runtime. */
    public long id() {
        return id;
    }

    /** The operand whose device tensors this one's are: itself unless it is an alias. */
    public Operand root() {
        return root;
    }

    /** Drops one client handle of the root; true when it was the last, and the client's use goes. */
    boolean releaseHandle() {
        return (int) HANDLES.getAndAdd(root, -1) == 1;
    }

    /** Shape, dtype and sharding. */
    public TensorMeta meta() {
        return meta;
    }

    void retain() {
        USES.getAndAdd(root, 1);
    }

    /** Drops one use (of the root); true when it was the last. */
    boolean releaseUse() {
        return (int) USES.getAndAdd(root, -1) == 1;
    }

    @Override
    public String toString() {
        return "%" + id + " " + meta;
    }
}
