package org.dtorch.autograd;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
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
     * (and, with {@code g} unsqueezed, of a select). One {@code constant_pad_nd} with zeros, whose strategy keeps the shards
     * of the other dimensions where they are and a partial sum partial (ATen's {@code slice_backward} takes the global
     * sizes, which a shard's call cannot use).
     */
    static DTensor pad(DTensor g, long[] shape, int dim, long start, long end) {
        if (start == 0 && end == shape[dim]) {
            return g;
        }
        // constant_pad_nd's pairs run from the last dimension backwards: (before, after) of dimension `dim` is the last pair.
        List<Long> pairs = new ArrayList<>(Collections.nCopies(2 * (shape.length - dim), 0L));
        pairs.set(pairs.size() - 2, start);
        pairs.set(pairs.size() - 1, shape[dim] - end);
        return aten("constant_pad_nd", "T,[i],i", v(null, pairs, 0L), g);
    }

    static DTensor transposeLast(DTensor t) {
        return t.transpose(-2, -1);
    }
}
