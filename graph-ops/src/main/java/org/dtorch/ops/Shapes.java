package org.dtorch.ops;

import java.util.Arrays;

/**
 * Dimension indices and element counts as torch takes them: {@code -1} is the last dimension, and an index
 * outside {@code [-ndim, ndim)} is an {@link IndexOutOfBoundsException} (torch's {@code IndexError}) naming the
 * valid range; a shape with a negative size, or more elements than a long counts, is refused. Every operator
 * of this module and the {@code DTorch} / {@code DTensor} API check through here.
 *
 * <p>Thread-safe: stateless.
 */
public final class Shapes {

    private Shapes() {
    }

    /**
     * {@code dim} of a tensor of {@code ndim} dimensions, made non-negative.
     *
     * @param op the operator or method, named in the message
     * @throws IndexOutOfBoundsException if {@code dim} is outside {@code [-ndim, ndim)}
     */
    public static int normalizeDim(String op, int dim, int ndim) {
        int d = dim < 0 ? dim + ndim : dim;
        if (d < 0 || d >= ndim) {
            throw new IndexOutOfBoundsException(op + ": dimension " + dim + " is out of range ("
                + (ndim == 0 ? "the tensor has no dimensions" : "expected to be in range of [" + -ndim + ", " + (ndim - 1) + "]") + ")");
        }
        return d;
    }

    /**
     * The number of elements of {@code shape} (0 if any size is 0, as in torch).
     *
     * @param op the operator or method, named in the message
     * @throws IllegalArgumentException if a size is negative or the count does not fit a long
     */
    public static long numel(String op, long[] shape) {
        boolean empty = false;
        for (long s : shape) {
            if (s < 0) {
                throw new IllegalArgumentException(op + ": negative dimension " + s + " in shape " + Arrays.toString(shape));
            }
            empty |= s == 0;
        }
        if (empty) {
            return 0;
        }
        long n = 1;
        try {
            for (long s : shape) {
                n = Math.multiplyExact(n, s);
            }
        } catch (ArithmeticException overflow) {
            throw new IllegalArgumentException(op + ": shape " + Arrays.toString(shape) + " has more elements than a long can count");
        }
        return n;
    }
}
