package org.dtorch.core.kernel;

import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The identity of each reduction, per dtype: what the holders of a partial value that is "not theirs"
 * contain, so that reducing gives back the value exactly; and what a device whose shard is empty on a reduced
 * dimension contributes to a reduction ({@code -inf} to a floating-point maximum, the dtype's least value to an
 * integer one, false to a boolean one).
 *
 * <p>Thread-safe: stateless.
 */
public final class PartialValues {

    private PartialValues() {
    }

    /** The identity of {@code op} in {@code dtype}; the caller closes it. */
    public static Scalar identity(ReduceOpType op, ScalarType dtype) {
        ScalarType type = dtype.intern();
        boolean floating = switch (type) {
            case Float, Double, Half, BFloat16 -> true;
            default -> false;
        };
        return switch (op) {
            case SUM -> new Scalar(0L);
            case PRODUCT -> new Scalar(1L);
            case MAX -> floating ? new Scalar(Double.NEGATIVE_INFINITY) : new Scalar(minimum(type));
            case MIN -> floating ? new Scalar(Double.POSITIVE_INFINITY) : new Scalar(maximum(type));
            case AVG -> throw new IllegalArgumentException("P(avg) has no identity: an average cannot be created exactly from "
                + TorchTensors.dtypeName(type) + " values that are not partial");
        };
    }

    private static long minimum(ScalarType type) {
        return switch (type) {
            case Long -> Long.MIN_VALUE;
            case Int -> Integer.MIN_VALUE;
            case Short -> Short.MIN_VALUE;
            case Char -> Byte.MIN_VALUE;
            default -> 0L; // uint8 and bool
        };
    }

    private static long maximum(ScalarType type) {
        return switch (type) {
            case Long -> Long.MAX_VALUE;
            case Int -> Integer.MAX_VALUE;
            case Short -> Short.MAX_VALUE;
            case Char -> Byte.MAX_VALUE;
            case Byte -> 255L;
            default -> 1L; // bool
        };
    }
}
