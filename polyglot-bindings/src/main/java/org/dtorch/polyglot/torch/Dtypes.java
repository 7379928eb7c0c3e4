package org.dtorch.polyglot.torch;

import java.util.Locale;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * dtypes by their PyTorch names ({@code float32}, {@code int64}, {@code bfloat16}, ...), both ways.
 *
 * <p>Stateless: thread-safe.
 */
public final class Dtypes {
    private Dtypes() {
    }

    /** The libtorch type of a PyTorch dtype name. */
    public static ScalarType scalarType(String name) {
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "float32", "float" -> ScalarType.Float;
            case "float64", "double" -> ScalarType.Double;
            case "float16", "half" -> ScalarType.Half;
            case "bfloat16" -> ScalarType.BFloat16;
            case "int64", "long" -> ScalarType.Long;
            case "int32", "int" -> ScalarType.Int;
            case "int16", "short" -> ScalarType.Short;
            case "int8" -> ScalarType.Char;
            case "uint8" -> ScalarType.Byte;
            case "bool" -> ScalarType.Bool;
            case "complex64", "cfloat" -> ScalarType.ComplexFloat;
            case "complex128", "cdouble" -> ScalarType.ComplexDouble;
            default -> throw new IllegalArgumentException("unknown dtype '" + name + "'");
        };
    }

    /** The PyTorch name of a libtorch type. */
    static String name(ScalarType type) {
        return switch (type.intern()) {
            case ComplexFloat -> "complex64";
            case ComplexDouble -> "complex128";
            default -> TorchTensors.dtypeName(type);
        };
    }
}
