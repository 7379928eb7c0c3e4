package org.dtorch.autograd;

import java.util.Arrays;
import org.dtorch.ops.aten.AtenCall;

/**
 * The per-dimension parameters of a convolution or pooling call as its derivative needs them: one value per spatial
 * dimension, however the call gave them (one number for all, a list, the default).
 *
 * <p>Thread-safe: stateless.
 */
final class ConvolutionParams {
    private ConvolutionParams() {
    }

    /** True for a transposed convolution: by its name, or by {@code convolution}'s {@code transposed} flag. */
    static boolean transposed(AtenCall call) {
        return call.overload().name().startsWith("conv_transpose") || Boolean.TRUE.equals(call.constant("transposed"));
    }

    /**
     * {@code value} as {@code count} numbers: a number repeated, a list of one repeated, a list of {@code count} as it is,
     * nothing (or an empty list) as {@code otherwise} repeated; null for anything else.
     */
    static long[] perDim(Object value, int count, long otherwise) {
        long[] out = new long[count];
        if (value == null || value instanceof long[] l && l.length == 0) {
            Arrays.fill(out, otherwise);
            return out;
        }
        if (value instanceof Number x) {
            Arrays.fill(out, x.longValue());
            return out;
        }
        if (value instanceof long[] l && (l.length == 1 || l.length == count)) {
            for (int i = 0; i < count; i++) {
                out[i] = l[l.length == 1 ? 0 : i];
            }
            return out;
        }
        return null;
    }

    /**
     * A convolution's padding per dimension: numbers as given, {@code "valid"} as none, {@code "same"} as
     * {@code dilation * (kernel - 1) / 2} where that total is even on every dimension (libtorch pads an odd total one
     * more at the end, which a symmetric padding cannot say: null then).
     */
    static long[] padding(Object value, long[] kernel, long[] dilation) {
        if ("valid".equals(value)) {
            return new long[kernel.length];
        }
        if ("same".equals(value)) {
            long[] out = new long[kernel.length];
            for (int i = 0; i < out.length; i++) {
                long total = dilation[i] * (kernel[i] - 1);
                if (total % 2 != 0) {
                    return null;
                }
                out[i] = total / 2;
            }
            return out;
        }
        return perDim(value, kernel.length, 0);
    }
}
