package org.dtorch.ops;

import java.util.Arrays;
import java.util.Objects;
import org.dtorch.ops.aten.AtenCall;

/**
 * The ATen calls of {@link org.dtorch.api.DTensor}'s shape methods, which run through the generic operator and its
 * {@link ViewStrategy}. Each checks its arguments first, so that a Java caller gets the method's name and the valid
 * range (as every {@code DTensor} method does) rather than libtorch's message.
 *
 * <p>Stateless. Thread-safe.
 */
public final class ViewCalls {
    private ViewCalls() {
    }

    /**
     * For each output dimension of {@code call}, an operator that only reorders dimensions ({@code transpose},
     * {@code permute}, {@code t}, {@code movedim}, {@code mT}, ...), the input dimension it is.
     */
    public static int[] dimensionOrder(AtenCall call, int ndim) {
        return ViewStrategy.permutation(call, ndim);
    }

    /** {@code transpose(a, b)} of a tensor of {@code ndim} dimensions. */
    public static AtenCall transpose(int ndim, int a, int b) {
        return AtenCall.of("transpose", "T,i,i", null, (long) Shapes.normalizeDim("transpose", a, ndim),
            (long) Shapes.normalizeDim("transpose", b, ndim));
    }

    /** {@code permute(dims)} of a tensor of {@code ndim} dimensions. */
    public static AtenCall permute(int ndim, int[] dims) {
        Objects.requireNonNull(dims, "permute: dims is null");
        long[] order = new long[dims.length];
        for (int i = 0; i < dims.length; i++) {
            order[i] = Shapes.normalizeDim("permute", dims[i], ndim);
        }
        if (dims.length != ndim || Arrays.stream(order).distinct().count() != ndim) {
            throw new IllegalArgumentException("permute: " + Arrays.toString(dims) + " is not a permutation of " + ndim + " dimensions");
        }
        return AtenCall.of("permute", "T,[i]", null, Arrays.stream(order).boxed().toList());
    }

    /** {@code reshape(shape)}, or {@code view(shape)} when {@code asView}; one size may be -1. */
    public static AtenCall reshape(long[] shape, boolean asView) {
        String name = asView ? "view" : "reshape";
        Objects.requireNonNull(shape, () -> name + ": shape is null");
        Shapes.numel(name, Arrays.stream(shape).filter(s -> s != -1).toArray());
        return AtenCall.of(name, "T,[i]", null, Arrays.stream(shape).boxed().toList());
    }

    /** {@code narrow(dim, start, length)} of a tensor of shape {@code shape}; a negative dim or start counts from the end. */
    public static AtenCall narrow(long[] shape, int dim, long start, long length) {
        int d = Shapes.normalizeDim("narrow", dim, shape.length);
        long size = shape[d];
        long first = start < 0 ? start + size : start;
        if (first < 0 || first > size) {
            throw new IllegalArgumentException("narrow: start " + start + " is out of range for a dimension of size " + size
                + " (expected to be in range of [" + -size + ", " + size + "])");
        }
        if (length < 0 || first > size - length) {
            throw new IllegalArgumentException("narrow: start " + start + " and length " + length + " do not fit dimension " + d
                + " of size " + size);
        }
        return AtenCall.of("narrow", "T,i,i,i", null, (long) d, first, length);
    }
}
