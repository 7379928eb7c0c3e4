package org.dtorch.api;

import java.util.List;
import java.util.Set;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.CastSpec;
import org.dtorch.ops.CopySpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RegionWriteSpec;
import org.dtorch.ops.ViewCalls;
import org.dtorch.ops.aten.AtenCall;

/**
 * Keeps views of distributed tensors what torch's views are: the same memory as their base. A view whose operator runs
 * on every device's own shard ({@code transpose}, {@code t[:, 2]} of a row-sharded tensor) gets the device tensors that
 * libtorch's view shares with the base's, so the two write into each other with nothing else to do ({@link Storage}). A
 * view that had to move its base first has memory of its own, derived from the base's: a write into it is written back
 * into the base (into the view's box of it, for {@code narrow}, {@code slice}, {@code select} and the pieces of
 * {@code split}; as a whole otherwise), and a view read after its base was written is computed again first.
 *
 * <p>Writes through tensors the client cannot see (the torch tensors {@code to_local()} lends) are not tracked.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class Aliasing {
    /** Views whose values are the base's elements in another shape, in the same order. */
    private static final Set<String> RESHAPES = Set.of("view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze",
        "unsqueeze", "view_as", "reshape_as");
    /** Views that reorder dimensions. */
    private static final Set<String> PERMUTATIONS = Set.of("transpose", "swapaxes", "swapdims", "t", "permute", "movedim", "moveaxis",
        "mT", "adjoint");
    /** Views that are boxes of their base. */
    private static final Set<String> BOXES = Set.of("narrow", "slice", "select", "split", "split_with_sizes", "chunk", "unbind",
        "tensor_split", "hsplit", "vsplit", "dsplit");

    private final DTorch runtime;

    Aliasing(DTorch runtime) {
        this.runtime = runtime;
    }

    /**
     * Gives the outputs of {@code spec} on {@code inputs} their memory: the input's where the operator returns a view of it
     * and ran on it in place (no move: {@code fitted[0] == inputs[0]}), derived memory where it returns a view of a moved
     * copy, their own otherwise.
     */
    void outputsOf(OpSpec spec, DTensor[] inputs, DTensor[] fitted, List<DTensor> outputs) {
        if (inputs.length == 0 || outputs.isEmpty()) {
            return;
        }
        if (spec instanceof CastSpec && inputs[0].dtype() == outputs.getFirst().dtype()) {
            outputs.getFirst().shareStorage(inputs[0].storage()); // to() the same dtype is the tensor itself, as in torch
            return;
        }
        if (!(spec instanceof AtenSpec aten) || !aten.call().overload().returnsView()) {
            return;
        }
        AtenCall call = aten.call();
        if (fitted[0] == inputs[0]) {
            for (DTensor out : outputs) {
                out.shareStorage(inputs[0].storage());
            }
            return;
        }
        if (call.inputCount() != 1) {
            return; // a view of one of several moved inputs: its own memory
        }
        long offset = 0;
        String name = call.overload().name();
        for (int k = 0; k < outputs.size(); k++) {
            DTensor out = outputs.get(k);
            Region region = null;
            if (BOXES.contains(name)) {
                region = box(call, inputs[0].shape(), out.shape(), offset, outputs.size());
                if (region != null && !name.equals("narrow") && !name.equals("slice") && !name.equals("select")) {
                    offset += name.equals("unbind") ? 1 : out.shape()[dim(call, inputs[0].ndim())];
                }
            }
            out.shareStorage(Storage.derived(out, inputs[0], call, k, region));
        }
    }

    /** The box of {@code base} that output {@code out} of a box view is, or null when it cannot be told from the call. */
    private static Region box(AtenCall call, long[] base, long[] out, long offset, int outputs) {
        String name = call.overload().name();
        int d = dim(call, base.length);
        if (d < 0) {
            return null;
        }
        Region whole = Region.whole(base);
        switch (name) {
            case "select" -> {
                long index = ((Number) call.constant("index")).longValue();
                return whole.withIndex(d, index < 0 ? index + base[d] : index);
            }
            case "narrow" -> {
                if (!(call.constant("start") instanceof Number start)) {
                    return null;
                }
                long s = start.longValue() < 0 ? start.longValue() + base[d] : start.longValue();
                return whole.withRange(d, s, out[d], 1);
            }
            case "slice" -> {
                long step = call.constant("step") instanceof Number n ? n.longValue() : 1;
                long start = call.constant("start") instanceof Number n ? n.longValue() : 0;
                start = start < 0 ? Math.max(0, start + base[d]) : Math.min(start, base[d]);
                return whole.withRange(d, start, out[d], step);
            }
            case "unbind" -> {
                return whole.withIndex(d, offset);
            }
            default -> {
                return outputs > 0 && out.length == base.length ? whole.withRange(d, offset, out[d], 1) : null;
            }
        }
    }

    private static int dim(AtenCall call, int ndim) {
        Object dim = call.constant("dim");
        if (!(dim instanceof Number n)) {
            return call.hasParam("dim") ? 0 : -1;
        }
        int d = Math.toIntExact(n.longValue());
        return d < 0 ? d + ndim : d;
    }

    /**
     * Computes {@code t} again from its base when the base was written since (its base first, when that is a derived
     * view too). Every input of every operator passes here before the operator is added.
     */
    void fresh(DTensor t) {
        Storage.Derivation d = t.storage().derivation();
        if (d == null) {
            return;
        }
        fresh(d.parent);
        long version = d.parent.storage().version();
        if (d.seen == version || d.root.isClosed() || d.parent.isClosed()) {
            return;
        }
        d.seen = version; // before the operators below, whose inputs pass here again
        List<DTensor> again = runtime.aten(d.call, d.parent);
        try {
            runtime.applyNoOutput(CopySpec.INSTANCE, d.root, again.get(d.output));
            t.storage().written();
        } finally {
            again.forEach(DTensor::close);
        }
    }

    /**
     * Refuses, before anything is written, a write into {@code t} that could not be written back to the base it is a
     * derived view of.
     */
    void checkWritable(DTensor t, String op) {
        Storage.Derivation d = t.storage().derivation();
        if (d == null || d.region != null) {
            return;
        }
        String name = d.call.overload().name();
        if (!RESHAPES.contains(name) && !PERMUTATIONS.contains(name)) {
            throw new UnsupportedOperationException(op + ": " + t + " is a view made by " + d.call.qualifiedName() + " of a tensor that had "
                + "to be redistributed for it, so it has memory of its own; a write into it cannot be written back into "
                + d.parent + ". Write into a copy (clone()), or redistribute the base so that the view runs where it is");
        }
    }

    /** Counts a write into {@code t}'s memory and writes it back into the base of a derived view. */
    void written(DTensor t) {
        Storage storage = t.storage();
        storage.written();
        Storage.Derivation d = storage.derivation();
        if (d == null || d.root.isClosed() || d.parent.isClosed()) {
            return;
        }
        d.seen = d.parent.storage().version(); // the root is the newer value: it must not be computed again from the parent
        if (d.region != null) {
            runtime.write(RegionWriteSpec.ofTensor(d.region), d.parent, d.root);
        } else {
            try (DTensor back = inverse(d)) {
                runtime.write(CopySpec.INSTANCE, d.parent, back);
            }
        }
        d.seen = d.parent.storage().version();
    }

    /** The root of {@code d} in its parent's shape and dimension order. */
    private DTensor inverse(Storage.Derivation d) {
        String name = d.call.overload().name();
        if (RESHAPES.contains(name)) {
            return d.root.reshape(d.parent.shape());
        }
        int n = d.parent.ndim();
        int[] order = ViewCalls.dimensionOrder(d.call, n);
        int[] back = new int[n];
        for (int k = 0; k < n; k++) {
            back[order[k]] = k;
        }
        return runtime.aten(ViewCalls.permute(n, back), d.root).getFirst();
    }

}
