package org.dtorch.ops;

import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A number operand as torch's {@code Scalar} holds it: a bool, a 64-bit integer kept exact (a double loses
 * integers above 2^53), or a double. Its category decides torch's type promotion against a tensor.
 *
 * <p>Thread-safe: immutable.
 */
final class ScalarValue {
    /** The categories, in torch's promotion order: a higher category than the tensor's decides the result. */
    enum Category { BOOL, INTEGRAL, FLOATING }

    private final Category category;
    private final long bits;

    private ScalarValue(Category category, long bits) {
        this.category = category;
        this.bits = bits;
    }

    static ScalarValue ofLong(long value) {
        return new ScalarValue(Category.INTEGRAL, value);
    }

    static ScalarValue ofDouble(double value) {
        return new ScalarValue(Category.FLOATING, Double.doubleToRawLongBits(value));
    }

    static ScalarValue ofBool(boolean value) {
        return new ScalarValue(Category.BOOL, value ? 1 : 0);
    }

    Category category() {
        return category;
    }

    boolean isFloating() {
        return category == Category.FLOATING;
    }

    /** The integer value (0 or 1 for a bool); only for integral and bool values. */
    long longValue() {
        if (isFloating()) {
            throw new IllegalStateException("the scalar " + this + " is not integral");
        }
        return bits;
    }

    double doubleValue() {
        return isFloating() ? Double.longBitsToDouble(bits) : bits;
    }

    /** A new libtorch scalar of this value; the caller closes it. Bools travel as the integers 0 and 1. */
    Scalar toScalar() {
        return isFloating() ? new Scalar(Double.longBitsToDouble(bits)) : new Scalar(bits);
    }

    /** torch's result dtype of a tensor of {@code tensor} with this scalar (before any true division). */
    ScalarType promote(ScalarType tensor) {
        Category tensorCategory = tensor == ScalarType.Bool ? Category.BOOL
            : Rules.isFloating(tensor) ? Category.FLOATING : Category.INTEGRAL;
        if (category.compareTo(tensorCategory) <= 0) {
            return tensor;
        }
        return category == Category.FLOATING ? ScalarType.Float : ScalarType.Long;
    }

    /**
     * Refuses a value that {@code dtype} cannot hold, as torch does ("value cannot be converted without
     * overflow"): an integer outside an integral dtype's range, or a NaN, an infinity or an out-of-range double
     * going into an integral dtype. Bool and floating dtypes take any value.
     */
    void checkFits(String op, ScalarType dtype) {
        long[] range = Rules.integralRange(dtype);
        if (range == null || category == Category.BOOL) {
            return;
        }
        boolean fits = isFloating()
            ? doubleValue() >= (double) range[0] && doubleValue() < (double) range[1] + 1.0
            : bits >= range[0] && bits <= range[1];
        if (!fits) {
            throw new IllegalArgumentException(op + ": the value " + this + " cannot be converted to " + TorchTensors.dtypeName(dtype)
                + " without overflow (its range is " + range[0] + " to " + range[1] + ")");
        }
    }

    void write(WireWriter out) {
        out.putByte(category.ordinal()).putLong(bits);
    }

    static ScalarValue read(WireReader in, String what) {
        Category category = Category.values()[in.getByteIn(what + " category", 0, Category.values().length - 1)];
        return new ScalarValue(category, in.getLong(what));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ScalarValue v && v.category == category && v.bits == bits;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(bits) * 3 + category.ordinal();
    }

    /** {@code 4611686018427387905}, {@code 2.5}, {@code True}. */
    @Override
    public String toString() {
        return switch (category) {
            case BOOL -> bits != 0 ? "True" : "False";
            case INTEGRAL -> Long.toString(bits);
            case FLOATING -> Double.toString(Double.longBitsToDouble(bits));
        };
    }
}
