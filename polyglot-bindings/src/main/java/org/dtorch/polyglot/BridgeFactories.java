package org.dtorch.polyglot;

import static org.dtorch.polyglot.BridgeArguments.asDouble;
import static org.dtorch.polyglot.BridgeArguments.exactLong;
import static org.dtorch.polyglot.BridgeArguments.longs;
import static org.dtorch.polyglot.BridgeArguments.placementArray;
import static org.dtorch.polyglot.BridgeArguments.scalarType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.Shapes;
import org.dtorch.polyglot.torch.PyTensor;
import org.graalvm.polyglot.Value;

/**
 * The tensors {@link PyBridge} makes for Python: the factories, tensors from Python's numbers (integers exact into
 * integral dtypes, floats truncated toward zero as torch truncates them, values a dtype cannot hold refused as torch
 * refuses them), from a {@code torch.Tensor} Python holds, and from every device's own local tensor; and the local
 * tensors back ({@code to_local}).
 *
 * <p>Not thread-safe: the Python client thread that owns the runtime.
 */
final class BridgeFactories {
    private final DTorch runtime;

    BridgeFactories(DTorch runtime) {
        this.runtime = runtime;
    }

    /** {@link PyBridge#factory}. */
    DTensor factory(String kind, Value shape, String dtype, DeviceMesh mesh, Value placements, long seed) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        return switch (kind) {
            case "empty" -> runtime.empty(dims, type, mesh, ps);
            case "zeros" -> runtime.zeros(dims, type, mesh, ps);
            case "ones" -> runtime.ones(dims, type, mesh, ps);
            case "rand" -> runtime.apply(FactorySpec.random(FactorySpec.Kind.RAND, seed, dims, type, BridgeArguments.sharding(mesh, ps)));
            case "randn" -> runtime.randn(seed, dims, type, mesh, ps);
            default -> throw new IllegalArgumentException("unknown factory '" + kind + "'");
        };
    }

    /** {@link PyBridge#full}. */
    DTensor full(Value shape, String dtype, DeviceMesh mesh, Value placements, Value value, String valueKind) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        return switch (valueKind) {
            case "bool" -> runtime.full(value.asBoolean() ? 1L : 0L, dims, type, mesh, ps);
            case "int" -> runtime.full(exactLong("full", value), dims, type, mesh, ps);
            case "float" -> runtime.full(value.asDouble(), dims, type, mesh, ps);
            default -> throw new IllegalArgumentException("full: unknown value kind '" + valueKind + "'");
        };
    }

    /** {@link PyBridge#arange}. */
    DTensor arange(Value start, Value end, Value step, boolean integral, String dtype, DeviceMesh mesh, Value placements) {
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        if (integral) {
            return runtime.arange(exactLong("arange", start), exactLong("arange", end), exactLong("arange", step), type, mesh, ps);
        }
        return runtime.arange(asDouble(start), asDouble(end), asDouble(step), type, mesh, ps);
    }

    /** {@link PyBridge#fromValues}. */
    DTensor fromValues(Value flatValues, Value shape, String dtype, DeviceMesh mesh, Value placements) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        int n = Math.toIntExact(flatValues.getArraySize());
        if (Shapes.numel("tensor", dims) != n) {
            throw new IllegalArgumentException("tensor: " + n + " values do not fill shape " + Arrays.toString(dims));
        }
        Tensor host;
        if (TorchTensors.dtypeName(type).startsWith("int") || type == ScalarType.Bool || type == ScalarType.Byte) {
            long[] values = new long[n];
            for (int i = 0; i < n; i++) {
                Value v = flatValues.getArrayElement(i);
                values[i] = v.isBoolean() ? (v.asBoolean() ? 1 : 0) : v.fitsInLong() ? v.asLong() : BridgeArguments.truncated("tensor", v);
            }
            host = fromPointer(new LongPointer(values), ScalarType.Long, dims, type);
            if (type != ScalarType.Bool) {
                checkRoundTrip(host, values, type);
            }
        } else {
            double[] values = new double[n];
            for (int i = 0; i < n; i++) {
                values[i] = asDouble(flatValues.getArrayElement(i));
            }
            host = fromPointer(new DoublePointer(values), ScalarType.Double, dims, type);
        }
        try (host) {
            return runtime.tensor(host, mesh, placementArray(placements));
        }
    }

    /** Refuses (closing {@code host}) values that did not survive the conversion to {@code type}: they overflowed it. */
    private static void checkRoundTrip(Tensor host, long[] values, ScalarType type) {
        long[] back = new long[values.length];
        try (Tensor asLong = host.to(ScalarType.Long); Tensor contiguous = asLong.contiguous()) {
            if (back.length > 0) {
                new LongPointer(contiguous.data_ptr()).capacity(back.length).get(back);
            }
        }
        for (int i = 0; i < values.length; i++) {
            if (back[i] != values[i]) {
                host.close();
                throw new IllegalArgumentException("tensor: the value " + values[i] + " cannot be converted to " + TorchTensors.dtypeName(type)
                    + " without overflow");
            }
        }
    }

    /** Takes {@code data} (closing it), whose length the caller checked against {@code shape}. */
    private static Tensor fromPointer(Pointer data, ScalarType sourceType, long[] shape, ScalarType target) {
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(sourceType));
             Tensor view = torch.from_blob(data, shape, options); Tensor converted = view.to(target)) {
            return converted.clone();
        }
    }

    /**
     * {@link PyBridge#fromTorch}. The values cross without their autograd history (distributed tensors have no
     * autograd): otherwise the workers would record graphs into a parameter's and hand back tensors that require grad.
     */
    DTensor fromTorch(PyTensor value, DeviceMesh mesh, Value placements) {
        try (Tensor tracked = value.torch(); Tensor t = tracked.detach(); Tensor host = t.is_cpu() ? new Tensor(t) : t.cpu()) {
            return runtime.tensor(host, mesh, placementArray(placements));
        }
    }

    /** {@link PyBridge#fromLocal}. */
    DTensor fromLocal(Value tensors, DeviceMesh mesh, Value placements, Value shape, boolean runCheck) {
        int n = Math.toIntExact(tensors.getArraySize());
        List<Tensor> locals = new ArrayList<>(n);
        try {
            for (int i = 0; i < n; i++) {
                Value v = tensors.getArrayElement(i);
                if (!(v.isHostObject() && v.asHostObject() instanceof PyTensor t)) {
                    throw new IllegalArgumentException("from_local: tensors[" + i + "] must be a torch.Tensor, got " + v);
                }
                try (Tensor tracked = t.torch()) {
                    locals.add(tracked.detach()); // the values, not their autograd history (see fromTorch)
                }
            }
            long[] global = shape == null || shape.isNull() ? null : longs(shape);
            return runtime.fromLocal(locals, mesh, global, runCheck, placementArray(placements));
        } finally {
            locals.forEach(Tensor::close);
        }
    }

    /** {@link PyBridge#toLocal}. */
    static PyTensor[] toLocal(DTensor t) {
        List<Tensor> locals = t.toLocal();
        PyTensor[] out = new PyTensor[locals.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = PyTensor.wrap(locals.get(i));
        }
        return out;
    }
}
