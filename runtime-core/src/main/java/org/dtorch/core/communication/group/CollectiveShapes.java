package org.dtorch.core.communication.group;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Shape arithmetic that the backends share. Shard sizes always come from
 * {@link org.dtorch.core.tensor.BalancedSplit}; this class only sums and substitutes them.
 *
 * <p>Thread-safe: stateless.
 */
final class CollectiveShapes {

    private CollectiveShapes() {
    }

    /** Prefix sums: where each piece of {@code sizes} starts. */
    static long[] offsets(long[] sizes) {
        long[] offsets = new long[sizes.length];
        for (int i = 1; i < sizes.length; i++) {
            offsets[i] = offsets[i - 1] + sizes[i - 1];
        }
        return offsets;
    }

    static long sum(long[] sizes) {
        long total = 0;
        for (long s : sizes) {
            total += s;
        }
        return total;
    }

    static long max(long[] sizes) {
        long max = 0;
        for (long s : sizes) {
            max = Math.max(max, s);
        }
        return max;
    }

    static boolean allEqual(long[] sizes) {
        for (long s : sizes) {
            if (s != sizes[0]) {
                return false;
            }
        }
        return true;
    }

    /** The shape of {@code t} with dimension {@code dim} replaced by {@code size}. */
    static long[] withDim(Tensor t, int dim, long size) {
        long[] shape = TorchTensors.shape(t);
        shape[dim] = size;
        return shape;
    }

    /** The shape {@code shape} with dimension {@code dim} replaced by {@code size}. */
    static long[] withDim(long[] shape, int dim, long size) {
        long[] copy = shape.clone();
        copy[dim] = size;
        return copy;
    }

    /** Elements of one index of {@code dim} of {@code shape}: the product of the other dims' sizes. */
    static long rowElements(long[] shape, int dim) {
        long elements = 1;
        for (int d = 0; d < shape.length; d++) {
            if (d != dim) {
                elements *= shape[d];
            }
        }
        return elements;
    }

    /** Elements of one index of {@code dim} of {@code t}. */
    static long rowElements(Tensor t, int dim) {
        return rowElements(TorchTensors.shape(t), dim);
    }

    static long numel(long[] shape) {
        long n = 1;
        for (long s : shape) {
            n *= s;
        }
        return n;
    }
}
