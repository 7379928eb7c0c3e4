package org.dtorch.autograd;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;
import org.dtorch.api.DTensor;
import org.dtorch.ops.aten.AtenCall;

/**
 * The compositions derivatives share: ATen calls by name, the sum that undoes broadcasting, and the expansion that
 * undoes a reduction.
 *
 * <p>Thread-safe: stateless.
 */
final class Grads {
    private Grads() {
    }

    /** {@code aten::name} chosen by the kinds {@code key} ({@link org.dtorch.ops.aten.ArgKind}), its first output. */
    static DTensor aten(String name, String key, Object[] values, DTensor... inputs) {
        return all(name, key, values, inputs).getFirst();
    }

    /** {@code aten::name} chosen by the kinds {@code key}, all its outputs. */
    static List<DTensor> all(String name, String key, Object[] values, DTensor... inputs) {
        return inputs[0].runtime().aten(AtenCall.of(name, key, values), inputs);
    }

    /** The values of a call, tensors as null placeholders. */
    static Object[] v(Object... values) {
        return values;
    }

    /** {@code shape} as the list an {@code int[]} parameter takes. */
    static List<Long> list(long... shape) {
        List<Long> out = new ArrayList<>(shape.length);
        for (long s : shape) {
            out.add(s);
        }
        return out;
    }

    /** {@code g} summed down to {@code shape}: the gradient of an input that broadcasting expanded to {@code g}'s shape. */
    static DTensor sumTo(DTensor g, long[] shape) {
        long[] gs = g.shape();
        if (Arrays.equals(gs, shape)) {
            return g;
        }
        DTensor r = g;
        int lead = gs.length - shape.length;
        if (lead > 0) {
            int[] dims = new int[lead];
            for (int i = 0; i < lead; i++) {
                dims[i] = i;
            }
            r = r.sum(dims, false);
        }
        List<Integer> ones = new ArrayList<>();
        for (int i = 0; i < shape.length; i++) {
            if (shape[i] == 1 && r.size(i) != 1) {
                ones.add(i);
            }
        }
        if (!ones.isEmpty()) {
            r = r.sum(ones.stream().mapToInt(Integer::intValue).toArray(), true);
        }
        return r;
    }

    /** {@code dims} (negative from the end; none: all of {@code ndim}) as sorted non-negative dimensions. */
    static int[] normalize(int[] dims, int ndim) {
        TreeSet<Integer> set = new TreeSet<>();
        if (dims.length == 0) {
            for (int d = 0; d < ndim; d++) {
                set.add(d);
            }
        }
        for (int d : dims) {
            set.add(d < 0 ? d + ndim : d);
        }
        return set.stream().mapToInt(Integer::intValue).toArray();
    }

    /** The gradient of a sum over {@code dims} (sorted, non-negative) of a tensor of {@code shape}: {@code g} expanded back. */
    static DTensor unreduce(DTensor g, long[] shape, int[] dims, boolean keepdim) {
        DTensor r = g;
        if (!keepdim) {
            for (int d : dims) {
                r = aten("unsqueeze", "T,i", v(null, (long) d), r);
            }
        }
        return expand(r, shape);
    }

    /** {@code g} expanded to {@code shape}. */
    static DTensor expand(DTensor g, long[] shape) {
        if (Arrays.equals(g.shape(), shape)) {
            return g;
        }
        return aten("expand", "T,[i]", v(null, list(shape)), g);
    }

    /** The number of elements the dimensions {@code dims} of {@code shape} hold together. */
    static long count(long[] shape, int[] dims) {
        long n = 1;
        for (int d : dims) {
            n *= shape[d];
        }
        return n;
    }

    /**
     * {@code g} placed at {@code [start, end)} of dimension {@code dim} in zeros of {@code shape}: the gradient of a slice
     * (and, with {@code g} unsqueezed, of a select). A concatenation with zeros on {@code g}'s placements, so that shards of
     * the other dimensions stay where they are (ATen's {@code slice_backward} takes the global sizes, which a shard's call
     * cannot use).
     */
    static DTensor pad(DTensor g, long[] shape, int dim, long start, long end) {
        List<DTensor> parts = new ArrayList<>(3);
        if (start > 0) {
            parts.add(zerosLike(g, dim, start));
        }
        parts.add(g);
        if (end < shape[dim]) {
            parts.add(zerosLike(g, dim, shape[dim] - end));
        }
        return parts.size() == 1 ? g : g.runtime().cat(parts, dim);
    }

    /** Zeros of {@code g}'s shape but {@code size} along {@code dim}, on {@code g}'s mesh and placements (partial as R). */
    private static DTensor zerosLike(DTensor g, int dim, long size) {
        long[] shape = g.shape();
        shape[dim] = size;
        org.dtorch.core.distributed.Placement[] placements = g.placements().stream()
            .map(p -> p.isPartial() ? org.dtorch.core.distributed.Placement.replicate() : p)
            .toArray(org.dtorch.core.distributed.Placement[]::new);
        return g.runtime().zeros(shape, g.dtype(), g.mesh(), placements);
    }

    static DTensor transposeLast(DTensor t) {
        return t.transpose(-2, -1);
    }
}
