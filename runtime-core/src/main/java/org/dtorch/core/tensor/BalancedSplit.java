package org.dtorch.core.tensor;

/**
 * The balanced split of one tensor dimension over {@code parts} shards: sizes differ by at most one and
 * the larger shards come first, so 10 over 4 is {@code 3, 3, 2, 2} with offsets {@code 0, 3, 6, 8}.
 * This is DTorch's convention for uneven shards, and every layer of this runtime computes shard sizes
 * and offsets here and nowhere else.
 *
 * <p>PyTorch's {@code torch.chunk} (and so DTensor's {@code Shard}) differs: it gives every shard
 * {@code ceil(size / parts)} elements and the last ones what is left, so 10 over 4 is {@code 3, 3, 3, 1},
 * and it can even produce fewer shards than asked. Tensors exchanged with PyTorch code must be
 * re-split.
 *
 * <p>A dimension shorter than the number of parts gives the last shards no element, as PyTorch's DTensor gives such
 * devices zero-size shards: 2 over 4 is {@code 1, 1, 0, 0} with offsets {@code 0, 1, 2, 2}, and 0 over 4 is
 * {@code 0, 0, 0, 0}. An empty shard starts where the elements end.
 *
 * <p>Thread-safe: stateless.
 */
public final class BalancedSplit {

    private BalancedSplit() {
    }

    /**
     * The shard sizes of a dimension of {@code dimSize} elements over {@code parts} shards.
     *
     * @throws IllegalArgumentException if {@code parts < 1} or {@code dimSize < 0}
     */
    public static long[] sizes(long dimSize, int parts) {
        check(dimSize, parts);
        long[] sizes = new long[parts];
        for (int i = 0; i < parts; i++) {
            sizes[i] = sizeUnchecked(dimSize, parts, i);
        }
        return sizes;
    }

    /** The offsets of the shards, in elements from the start of the dimension. */
    public static long[] offsets(long dimSize, int parts) {
        check(dimSize, parts);
        long[] offsets = new long[parts];
        for (int i = 0; i < parts; i++) {
            offsets[i] = offsetUnchecked(dimSize, parts, i);
        }
        return offsets;
    }

    /** The size of shard {@code index}. */
    public static long size(long dimSize, int parts, int index) {
        check(dimSize, parts);
        checkIndex(parts, index);
        return sizeUnchecked(dimSize, parts, index);
    }

    /** The offset of shard {@code index}. */
    public static long offset(long dimSize, int parts, int index) {
        check(dimSize, parts);
        checkIndex(parts, index);
        return offsetUnchecked(dimSize, parts, index);
    }

    /** The size of the largest shard, {@code ceil(dimSize / parts)}; 0 when the dimension is empty. */
    public static long maxSize(long dimSize, int parts) {
        check(dimSize, parts);
        return sizeUnchecked(dimSize, parts, 0);
    }

    /** True when every shard has the same size. */
    public static boolean isEven(long dimSize, int parts) {
        check(dimSize, parts);
        return dimSize % parts == 0;
    }

    private static long sizeUnchecked(long dimSize, int parts, int index) {
        return dimSize / parts + (index < dimSize % parts ? 1 : 0);
    }

    private static long offsetUnchecked(long dimSize, int parts, int index) {
        long base = dimSize / parts;
        long remainder = dimSize % parts;
        return index * base + Math.min(index, remainder);
    }

    private static void check(long dimSize, int parts) {
        if (parts < 1) {
            throw new IllegalArgumentException("cannot split a dimension into " + parts + " shards; need at least 1");
        }
        if (dimSize < 0) {
            throw new IllegalArgumentException("cannot split a dimension of negative size " + dimSize + " over " + parts + " shards");
        }
    }

    private static void checkIndex(int parts, int index) {
        if (index < 0 || index >= parts) {
            throw new IllegalArgumentException("shard index " + index + " is out of range for " + parts + " shards");
        }
    }
}
