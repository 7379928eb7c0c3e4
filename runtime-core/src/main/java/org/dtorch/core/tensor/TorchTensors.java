package org.dtorch.core.tensor;

import java.util.Arrays;
import java.util.Locale;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.LongArrayRef;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.DeviceType;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;

/**
 * Small, pure facts about libtorch tensors that error messages and validation need: shape, dtype name,
 * device kind, and a one-line description. No tensor math lives here.
 *
 * <p>Thread-safe: stateless; the tensors passed in must not be closed concurrently.
 */
public final class TorchTensors {
    /** Each dtype code's canonical constant (the first with that code, as {@link ScalarType#intern} finds it). */
    private static final ScalarType[] BY_CODE = byCode();

    private TorchTensors() {
    }

    /** The shape of a tensor as a Java array. */
    public static long[] shape(Tensor t) {
        int dims = (int) t.dim();
        long[] shape = new long[dims];
        for (int d = 0; d < dims; d++) {
            shape[d] = t.size(d);
        }
        return shape;
    }

    /**
     * The address of a tensor's first element, or 0 when it has none: libtorch gives a tensor without elements a null
     * data pointer, which JavaCPP returns as null.
     */
    public static long address(Tensor t) {
        org.bytedeco.javacpp.Pointer data = t.data_ptr();
        return data == null ? 0 : data.address();
    }

    /**
     * The dtype of a tensor as a canonical enum constant. JavaCPP returns enum values from native calls
     * as fresh instances (so {@code ==} and {@code switch} fail on them); always read dtypes here.
     */
    public static ScalarType dtype(Tensor t) {
        return canonical(t.scalar_type());
    }

    private static ScalarType[] byCode() {
        ScalarType[] all = ScalarType.values();
        int max = 0;
        for (ScalarType t : all) {
            max = Math.max(max, t.value);
        }
        ScalarType[] table = new ScalarType[max + 1];
        for (ScalarType t : all) {
            if (t.value >= 0 && table[t.value] == null) {
                table[t.value] = t;
            }
        }
        return table;
    }

    /**
     * {@code type} as its canonical enum constant: {@link ScalarType#intern}'s answer from a table, where
     * {@code intern} copies the enum's values and searches them on every call (a tensor's metadata is made for
     * every operator).
     */
    public static ScalarType canonical(ScalarType type) {
        ScalarType known = ofCode(type.value);
        return known != null ? known : type.intern();
    }

    /** The canonical constant of libtorch's dtype code {@code code} (its {@code value}), or null for none. */
    public static ScalarType ofCode(long code) {
        return code >= 0 && code < BY_CODE.length ? BY_CODE[(int) code] : null;
    }

    /** The PyTorch name of a dtype: {@code float32}, {@code bfloat16}, {@code int64}, ... */
    public static String dtypeName(ScalarType type) {
        return switch (type.intern()) {
            case Float -> "float32";
            case Double -> "float64";
            case Half -> "float16";
            case BFloat16 -> "bfloat16";
            case Long -> "int64";
            case Int -> "int32";
            case Short -> "int16";
            case Char -> "int8";
            case Byte -> "uint8";
            case Bool -> "bool";
            default -> type.name().toLowerCase(Locale.ROOT);
        };
    }

    /** The device kind a tensor lives on. */
    public static DeviceKind deviceKind(Tensor t) {
        return t.is_cuda() ? DeviceKind.CUDA : DeviceKind.CPU;
    }

    /** The device a tensor lives on; a CPU tensor is on {@code cpu:0}. */
    public static Device device(Tensor t) {
        if (!t.is_cuda()) {
            return Device.cpu(0);
        }
        try (org.bytedeco.pytorch.Device d = t.device()) {
            return Device.cuda(d.index());
        }
    }

    /** libtorch's device for ours; the caller closes it. All CPU devices are libtorch's one CPU. */
    public static org.bytedeco.pytorch.Device torchDevice(Device device) {
        return switch (device.kind()) {
            case CPU -> new org.bytedeco.pytorch.Device(DeviceType.CPU);
            case CUDA -> new org.bytedeco.pytorch.Device(DeviceType.CUDA, (byte) device.index());
        };
    }

    /**
     * Tensor options for {@code dtype} on {@code device}; the caller closes them. CUDA work is checked
     * first ({@link Cuda#require}), so a missing GPU fails with a message, not inside libtorch.
     */
    public static TensorOptions options(ScalarType dtype, Device device) {
        TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(dtype));
        if (device.kind() == DeviceKind.CPU) {
            return options;
        }
        Cuda.require(device);
        try (org.bytedeco.pytorch.Device d = torchDevice(device)) {
            return options.device(new DeviceOptional(d));
        }
    }

    /**
     * {@code t} on {@code device}: {@code t} itself (a new reference) when it is there already, else a copy made on
     * the calling thread's current stream, synchronous with the host when either side is the CPU.
     */
    public static Tensor to(Tensor t, Device device) {
        if (device(t).equals(device) || (device.kind() == DeviceKind.CPU && !t.is_cuda())) {
            return new Tensor(t);
        }
        if (device.kind() == DeviceKind.CPU) {
            return t.cpu();
        }
        Cuda.require(device);
        try (org.bytedeco.pytorch.Device d = torchDevice(device)) {
            return t.to(d, t.scalar_type(), false, false, new MemoryFormatOptional());
        }
    }

    /** {@code float32[4, 3] on cpu}, for messages. */
    public static String describe(Tensor t) {
        if (t == null) {
            return "null";
        }
        if (t.isNull() || !t.defined()) {
            return "an undefined tensor";
        }
        return dtypeName(dtype(t)) + Arrays.toString(shape(t)) + " on " + (t.is_cuda() ? device(t) : "cpu");
    }

    /**
     * The values of a CPU tensor as nested lists, like PyTorch prints them: {@code [[0, 1], [2, 3]]}.
     * Integer and bool dtypes print as integers; at most {@code maxValues} values are shown.
     */
    public static String format(Tensor t, int maxValues) {
        long numel = t.numel();
        int shown = (int) Math.min(numel, Math.max(0, maxValues));
        boolean integral = !t.is_floating_point() && !t.is_complex();
        // Integers are read as longs: a double holds them exactly only up to 2^53.
        long[] longs = new long[integral ? shown : 0];
        double[] doubles = new double[integral ? 0 : shown];
        try (Tensor flat = t.reshape(-1); Tensor head = flat.narrow(0, 0, shown);
             Tensor converted = head.to(integral ? ScalarType.Long : ScalarType.Double); Tensor values = converted.contiguous()) {
            if (shown > 0 && integral) {
                new org.bytedeco.javacpp.LongPointer(values.data_ptr()).capacity(shown).get(longs);
            } else if (shown > 0) {
                new org.bytedeco.javacpp.DoublePointer(values.data_ptr()).capacity(shown).get(doubles);
            }
        }
        boolean single = dtype(t) != ScalarType.Double;
        StringBuilder out = new StringBuilder();
        appendNested(out, shape(t), 0, new int[] {0}, shown, i -> integral ? Long.toString(longs[i])
            : single ? Float.toString((float) doubles[i]) : Double.toString(doubles[i]));
        return out.toString();
    }

    private static void appendNested(StringBuilder out, long[] shape, int dim, int[] next, int shown, java.util.function.IntFunction<String> value) {
        if (dim == shape.length) {
            if (next[0] < shown) {
                out.append(value.apply(next[0]++));
            } else if (next[0]++ == shown) {
                out.append("...");
            }
            return;
        }
        out.append('[');
        for (long i = 0; i < shape[dim]; i++) {
            if (next[0] > shown) {
                break;
            }
            if (i > 0) {
                out.append(", ");
            }
            appendNested(out, shape, dim + 1, next, shown, value);
        }
        out.append(']');
    }

    /** A libtorch shape argument. The caller closes it. */
    public static LongArrayRef arrayRef(long... values) {
        return new LongArrayRef(values, values.length);
    }
}
