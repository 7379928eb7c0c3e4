package org.dtorch.ops;

import org.dtorch.ops.aten.AtenCall;

/**
 * The ATen calls behind {@link org.dtorch.api.DTensor}'s comparison, logical and bitwise operators, {@code maskedFill}
 * and {@link org.dtorch.api.DTorch#where}: element-wise operators that run through the generic operator under the
 * {@link PointwiseStrategy}, so their result dtypes are libtorch's own (comparisons give bool, a {@code long} compared with
 * an int64 tensor compares exactly, an int64 tensor compared with a {@code double} compares in floating point, bool with
 * bool stays bool and int with int stays int for the bitwise operators).
 *
 * <p>A {@code long} scalar goes as an integral {@code Scalar} (the key {@code i}), a {@code double} as a floating one
 * ({@code f}), exactly as Python's {@code int} and {@code float} do in the {@code torch} module.
 *
 * <p>Thread-safe: the overloads a key selects are cached ({@link AtenCall#plan}); calls are immutable values.
 */
public final class CompareCalls {
    private CompareCalls() {
    }

    /** {@code aten::<name>(self, other)} on two tensors ({@code gt}, {@code logical_and}, {@code bitwise_or}, ...). */
    public static AtenCall tensors(String name) {
        return AtenCall.of(name, "T,T", null, null);
    }

    /** {@code aten::<name>(self)} on one tensor ({@code logical_not}, {@code bitwise_not}). */
    public static AtenCall unary(String name) {
        return AtenCall.of(name, "T", (Object) null);
    }

    /** {@code aten::<name>(self, value)} with a floating-point scalar. */
    public static AtenCall scalar(String name, double value) {
        return AtenCall.of(name, "T,f", null, value);
    }

    /** {@code aten::<name>(self, value)} with an exact integral scalar. */
    public static AtenCall scalar(String name, long value) {
        return AtenCall.of(name, "T,i", null, value);
    }
}
