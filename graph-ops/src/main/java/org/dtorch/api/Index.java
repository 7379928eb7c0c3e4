package org.dtorch.api;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.dtorch.ops.Region;

/**
 * One item of a basic index, as Python writes them between brackets: {@code t[1:5, ..., 2, None]} is
 * {@code t.getItem(Index.slice(1, 5), Index.ellipsis(), Index.at(2), Index.none())}. Negative positions count from the end
 * and slice bounds are clamped to the dimension, as in Python.
 *
 * <p>Immutable. Thread-safe.
 */
public sealed interface Index {

    /** An integer index: the dimension is selected away. */
    record At(long index) implements Index {
    }

    /** {@code start:stop:step}; a null bound is the dimension's start or end. */
    record Slice(Long start, Long stop, long step) implements Index {
        public Slice {
            if (step <= 0) {
                throw new IllegalArgumentException("slice step must be greater than zero, got " + step);
            }
        }
    }

    /** {@code ...}: as many whole dimensions as the other items leave. */
    record Ellipsis() implements Index {
    }

    /** {@code None}: a new dimension of size 1. */
    record NewAxis() implements Index {
    }

    /** {@code i}. */
    static Index at(long index) {
        return new At(index);
    }

    /** {@code :}, the whole dimension. */
    static Index all() {
        return new Slice(null, null, 1);
    }

    /** {@code start:stop}. */
    static Index slice(Long start, Long stop) {
        return new Slice(start, stop, 1);
    }

    /** {@code start:stop:step}. */
    static Index slice(Long start, Long stop, long step) {
        return new Slice(start, stop, step);
    }

    /** {@code ...}. */
    static Index ellipsis() {
        return new Ellipsis();
    }

    /** {@code None}. */
    static Index none() {
        return new NewAxis();
    }

    /**
     * The region of a tensor of {@code shape} that {@code index} selects (new axes add no dimension to it: a value written
     * there may have them, as size-1 dimensions).
     *
     * @throws IndexOutOfBoundsException for an integer index out of range or more items than dimensions
     * @throws IllegalArgumentException  for two ellipses
     */
    static Region region(long[] shape, Index... index) {
        Objects.requireNonNull(index, "index is null");
        List<Index> items = expand(shape.length, index);
        Region region = Region.whole(shape);
        int d = 0;
        for (Index item : items) {
            switch (item) {
                case NewAxis n -> {
                }
                case At at -> {
                    long size = shape[d];
                    long i = at.index() < 0 ? at.index() + size : at.index();
                    if (i < 0 || i >= size) {
                        throw new IndexOutOfBoundsException("index " + at.index() + " is out of bounds for dimension " + d + " with size " + size);
                    }
                    region = region.withIndex(d++, i);
                }
                case Slice s -> {
                    long size = shape[d];
                    long start = clamp(s.start(), 0, size);
                    long stop = clamp(s.stop(), size, size);
                    long count = stop <= start ? 0 : (stop - start + s.step() - 1) / s.step();
                    region = region.withRange(d++, count == 0 ? 0 : start, count, s.step());
                }
                case Ellipsis e -> throw new IllegalStateException("expanded away");
            }
        }
        return region;
    }

    /**
     * The shape a value written into {@code t[index]} takes against the region written, or null when it is its own: torch
     * broadcasts the value to the view's shape, in which each new axis ({@code None}) is a dimension of size 1 that the
     * region (which has none) lacks, so the value's size-1 dimensions that meet a new axis are dropped.
     */
    static long[] withoutNewAxes(int ndim, long[] value, Index... index) {
        List<Boolean> newAxis = new ArrayList<>();
        for (Index item : expand(ndim, index)) {
            if (item instanceof NewAxis) {
                newAxis.add(true);
            } else if (item instanceof Slice) {
                newAxis.add(false);
            }
        }
        int offset = newAxis.size() - value.length;
        List<Long> kept = new ArrayList<>();
        for (int j = 0; j < value.length; j++) {
            int p = offset + j;
            if (!(p >= 0 && newAxis.get(p) && value[j] == 1)) {
                kept.add(value[j]);
            }
        }
        return kept.size() == value.length ? null : kept.stream().mapToLong(Long::longValue).toArray();
    }

    /** {@code index} with its ellipsis (or the missing trailing items) as whole slices: one item per dimension, plus new axes. */
    static List<Index> expand(int ndim, Index... index) {
        int used = 0;
        int ellipses = 0;
        for (Index item : index) {
            Objects.requireNonNull(item, "an index item is null");
            if (item instanceof Ellipsis) {
                ellipses++;
            } else if (!(item instanceof NewAxis)) {
                used++;
            }
        }
        if (ellipses > 1) {
            throw new IllegalArgumentException("an index can only have a single ellipsis ('...')");
        }
        if (used > ndim) {
            throw new IndexOutOfBoundsException("too many indices for tensor of dimension " + ndim);
        }
        List<Index> out = new ArrayList<>();
        for (Index item : index) {
            if (item instanceof Ellipsis) {
                for (int k = 0; k < ndim - used; k++) {
                    out.add(all());
                }
            } else {
                out.add(item);
            }
        }
        if (ellipses == 0) {
            for (int k = used; k < ndim; k++) {
                out.add(all());
            }
        }
        return out;
    }

    private static long clamp(Long bound, long otherwise, long size) {
        if (bound == null) {
            return otherwise;
        }
        long b = bound < 0 ? bound + size : bound;
        return Math.max(0, Math.min(b, size));
    }
}
