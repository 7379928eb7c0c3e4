package org.dtorch.core.communication;

/**
 * How a reduction combines the values of the ranks (DTorch's {@code ReduceOpType}).
 *
 * <p>{@link #AVG} is defined for floating-point tensors only: an average of integers is not an
 * integer, and c10d backends disagree on its rounding, so integer tensors are rejected before any
 * communication.
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum ReduceOpType {
    /** Element-wise sum. */
    SUM,
    /** Element-wise mean over the ranks; floating-point tensors only. */
    AVG,
    /** Element-wise maximum. */
    MAX,
    /** Element-wise minimum. */
    MIN,
    /** Element-wise product. */
    PRODUCT;

    /** The lower-case name, as in {@code P(sum)}. */
    public String shortName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
