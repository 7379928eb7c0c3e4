package org.dtorch.api;

import org.dtorch.ops.Region;
import org.dtorch.ops.aten.AtenCall;

/**
 * The memory that some distributed tensors share on their devices, as views share a torch tensor's storage: a tensor and
 * the views taken of it without moving it ({@code t.transpose(0, 1)}, {@code t[:, 2]} where that keeps every shard
 * where it is) write into each other. Every write into any of them counts as a new {@link #version()}.
 *
 * <p>A view that had to move its base first (a slice across a sharded dimension gathers it) holds memory of its own: its
 * storage is <em>derived</em> from the base's ({@link Derivation}). The client keeps such a view equal to its base, as
 * torch's views are: a write into the view is written back into the base ({@code base[region] = view} where the view is a
 * region of it, a copy otherwise), and a view used after its base changed is computed again first.
 *
 * <p>Not thread-safe: the client thread that owns the runtime uses it.
 */
final class Storage {
    /** The writes into this memory so far. */
    private long version;
    /** How this memory follows another tensor's, or null for memory of its own. */
    private final Derivation derivation;

    private Storage(Derivation derivation) {
        this.derivation = derivation;
    }

    /** Memory of its own. */
    static Storage own() {
        return new Storage(null);
    }

    /** Memory that holds {@code root}, the result {@code output} of {@code call} on {@code parent}, and follows it. */
    static Storage derived(DTensor root, DTensor parent, AtenCall call, int output, Region region) {
        return new Storage(new Derivation(root, parent, call, output, region, parent.storage().version()));
    }

    long version() {
        return version;
    }

    /** Counts a write into this memory. */
    void written() {
        version++;
    }

    Derivation derivation() {
        return derivation;
    }

    /**
     * How a derived storage follows its base.
     *
     * <p>Not thread-safe, as {@link Storage}.
     */
    static final class Derivation {
        /** The view the memory was made for (the first handle of the storage), whose value is the one kept equal. */
        final DTensor root;
        /** The tensor it is a view of, kept alive as a torch view keeps its base. */
        final DTensor parent;
        /** The view operator, and which of its outputs the root is. */
        final AtenCall call;
        final int output;
        /** Where the view lies in the parent, when it is a box of it ({@code narrow}, {@code select}, {@code split}); else null. */
        final Region region;
        /** The parent's version the root was last made equal to. */
        long seen;

        Derivation(DTensor root, DTensor parent, AtenCall call, int output, Region region, long seen) {
            this.root = root;
            this.parent = parent;
            this.call = call;
            this.output = output;
            this.region = region;
            this.seen = seen;
        }
    }
}
