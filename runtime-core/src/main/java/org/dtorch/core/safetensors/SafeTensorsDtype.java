package org.dtorch.core.safetensors;

import java.util.Arrays;
import java.util.stream.Collectors;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The safetensors dtypes this runtime reads and writes, with their libtorch dtype and element size. The format names
 * more (F64, I8, I16, the FP8 kinds, ...); a file that uses one of those is refused by name.
 *
 * <p>Thread-safe: immutable.
 */
public enum SafeTensorsDtype {
    F32(ScalarType.Float, 4),
    F16(ScalarType.Half, 2),
    BF16(ScalarType.BFloat16, 2),
    I64(ScalarType.Long, 8),
    I32(ScalarType.Int, 4),
    U8(ScalarType.Byte, 1),
    BOOL(ScalarType.Bool, 1);

    private final ScalarType torch;
    private final int elementSize;

    SafeTensorsDtype(ScalarType torch, int elementSize) {
        this.torch = torch;
        this.elementSize = elementSize;
    }

    /** libtorch's dtype. */
    public ScalarType torch() {
        return torch;
    }

    /** Bytes per element. */
    public int elementSize() {
        return elementSize;
    }

    /** The names this runtime supports, for messages: {@code F32, F16, BF16, I64, I32, U8, BOOL}. */
    public static String supportedNames() {
        return Arrays.stream(values()).map(Enum::name).collect(Collectors.joining(", "));
    }

    /** The dtype named {@code name} in a header, or null for a name this runtime does not support. */
    public static SafeTensorsDtype ofName(String name) {
        for (SafeTensorsDtype d : values()) {
            if (d.name().equals(name)) {
                return d;
            }
        }
        return null;
    }

    /**
     * The dtype that stores {@code dtype}.
     *
     * @throws IllegalArgumentException for a libtorch dtype with no supported safetensors name (float64, int8, ...)
     */
    public static SafeTensorsDtype of(ScalarType dtype) {
        ScalarType interned = dtype.intern();
        for (SafeTensorsDtype d : values()) {
            if (d.torch == interned) {
                return d;
            }
        }
        throw new IllegalArgumentException("dtype " + TorchTensors.dtypeName(interned) + " has no supported safetensors dtype (supported: "
            + supportedNames() + ")");
    }
}
