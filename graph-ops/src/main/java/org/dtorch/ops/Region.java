package org.dtorch.ops;

import java.util.Arrays;
import java.util.Objects;

/**
 * A strided box of a tensor, as basic indexing selects it ({@code t[2:9:3, 4, ...]}): per dimension of the tensor the
 * first index, the number of indices and the step, and whether the dimension is selected away (an integer index, which
 * leaves a single index and drops the dimension from the box's shape). Indices are non-negative and in range; a box may
 * be empty (count 0).
 *
 * @param starts   per dimension, the first index
 * @param counts   per dimension, how many indices ({@code 1} for a selected dimension)
 * @param steps    per dimension, the distance between indices ({@code >= 1})
 * @param selected per dimension, true where an integer index drops it
 *
 * <p>Immutable (the arrays are copied in and out). Thread-safe.
 */
public record Region(long[] starts, long[] counts, long[] steps, boolean[] selected) {

    public Region {
        starts = starts.clone();
        counts = counts.clone();
        steps = steps.clone();
        selected = selected.clone();
        if (counts.length != starts.length || steps.length != starts.length || selected.length != starts.length) {
            throw new IllegalArgumentException("a region needs as many starts, counts, steps and selections as dimensions");
        }
        for (int d = 0; d < starts.length; d++) {
            if (starts[d] < 0 || counts[d] < 0 || steps[d] < 1 || selected[d] && counts[d] != 1) {
                throw new IllegalArgumentException("region dimension " + d + ": start " + starts[d] + ", count " + counts[d] + ", step "
                    + steps[d] + (selected[d] ? " (selected)" : ""));
            }
        }
    }

    /** The whole of a tensor of {@code shape}. */
    public static Region whole(long[] shape) {
        long[] ones = new long[shape.length];
        Arrays.fill(ones, 1);
        return new Region(new long[shape.length], shape, ones, new boolean[shape.length]);
    }

    /** This region with dimension {@code d} taken as {@code count} indices from {@code start} by {@code step}. */
    public Region withRange(int d, long start, long count, long step) {
        long[] s = starts.clone();
        long[] c = counts.clone();
        long[] st = steps.clone();
        boolean[] sel = selected.clone();
        s[d] = start;
        c[d] = count;
        st[d] = step;
        sel[d] = false;
        return new Region(s, c, st, sel);
    }

    /** This region with dimension {@code d} selected at {@code index}. */
    public Region withIndex(int d, long index) {
        long[] s = starts.clone();
        long[] c = counts.clone();
        long[] st = steps.clone();
        boolean[] sel = selected.clone();
        s[d] = index;
        c[d] = 1;
        st[d] = 1;
        sel[d] = true;
        return new Region(s, c, st, sel);
    }

    @Override
    public long[] starts() {
        return starts.clone();
    }

    @Override
    public long[] counts() {
        return counts.clone();
    }

    @Override
    public long[] steps() {
        return steps.clone();
    }

    @Override
    public boolean[] selected() {
        return selected.clone();
    }

    /** The number of dimensions of the tensor the region is of. */
    public int ndim() {
        return starts.length;
    }

    /** The shape of what the region selects: the counts of the dimensions not selected away. */
    public long[] shape() {
        long[] out = new long[starts.length];
        int n = 0;
        for (int d = 0; d < starts.length; d++) {
            if (!selected[d]) {
                out[n++] = counts[d];
            }
        }
        return Arrays.copyOf(out, n);
    }

    /** The tensor dimension of each dimension of {@link #shape()}. */
    int[] keptDims() {
        int[] out = new int[shape().length];
        for (int d = 0, k = 0; d < starts.length; d++) {
            if (!selected[d]) {
                out[k++] = d;
            }
        }
        return out;
    }

    /** True when dimension {@code d} is whole in a tensor of size {@code size} there: all of it, in order. */
    boolean isWhole(int d, long size) {
        return !selected[d] && starts[d] == 0 && counts[d] == size && (steps[d] == 1 || size <= 1);
    }

    /**
     * Checks the region against a tensor of {@code shape}: as many dimensions, every index in range.
     *
     * @throws IllegalArgumentException naming {@code op}, the dimension and the size
     */
    void check(String op, long[] shape) {
        if (shape.length != starts.length) {
            throw new IllegalArgumentException(op + ": a region of " + starts.length + " dimensions for a tensor of shape " + Arrays.toString(shape));
        }
        for (int d = 0; d < shape.length; d++) {
            long last = starts[d] + (counts[d] - 1) * steps[d];
            if (counts[d] > 0 && (starts[d] >= shape[d] || last >= shape[d])) {
                throw new IndexOutOfBoundsException(op + ": index " + last + " is out of bounds for dimension " + d + " with size " + shape[d]);
            }
        }
    }

    /**
     * The part of the region inside the block {@code [offset, offset + size)} of dimension {@code d}: the range of the
     * region's indices {@code k} (its {@code k}-th index along {@code d}) that fall there, as {@code {first, count}}
     * ({@code count} 0 when none does).
     */
    long[] within(int d, long offset, long size) {
        long start = starts[d];
        long step = steps[d];
        long first = offset <= start ? 0 : Math.ceilDiv(offset - start, step);
        long lastIndex = offset + size - 1;
        long last = lastIndex < start ? -1 : Math.min(counts[d] - 1, Math.floorDiv(lastIndex - start, step));
        return last < first ? new long[] {first, 0} : new long[] {first, last - first + 1};
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Region r && Arrays.equals(starts, r.starts) && Arrays.equals(counts, r.counts) && Arrays.equals(steps, r.steps)
            && Arrays.equals(selected, r.selected);
    }

    @Override
    public int hashCode() {
        return Objects.hash(Arrays.hashCode(starts), Arrays.hashCode(counts), Arrays.hashCode(steps), Arrays.hashCode(selected));
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("[");
        for (int d = 0; d < starts.length; d++) {
            sb.append(d == 0 ? "" : ", ");
            if (selected[d]) {
                sb.append(starts[d]);
            } else {
                sb.append(starts[d]).append(':').append(starts[d] + counts[d] * steps[d]);
                if (steps[d] != 1) {
                    sb.append(':').append(steps[d]);
                }
            }
        }
        return sb.append(']').toString();
    }
}
