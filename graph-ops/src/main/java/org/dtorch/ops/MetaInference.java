package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * Exact output shapes and dtypes of an ATen call on global tensors, without data: the call runs on tensors of libtorch's
 * {@code meta} device (shape and dtype, no storage), so the operator's own shape and type rules answer.
 *
 * <p>A few operators have no meta kernel in libtorch's C++ build (PyTorch registers theirs in Python; {@code where.self}
 * and {@code count_nonzero.dim_IntList} are two). For the families whose output shape is their definition the answer
 * is still exact: the shape comes from the strategy's rule ({@link ShardingStrategy#outputShape}: the broadcast shape
 * of element-wise operators, the kept dimensions of reductions) and the dtype from running the call on CPU tensors of
 * one element each, with the inputs' dtypes and numbers of dimensions (type promotion and reduction dtypes depend only
 * on dtypes and on whether a tensor has zero dimensions, never on sizes). The result's number of dimensions is checked
 * against the rule's. Other operators without a meta kernel are refused, naming the operator.
 *
 * <p>Stateless. Thread-safe: every call makes and closes its own tensors.
 */
final class MetaInference {
    /** Shape and dtype of one output. */
    record Out(long[] shape, ScalarType dtype) {
    }

    private MetaInference() {
    }

    static List<Out> infer(AtenCall call, List<TensorMeta> inputs, ShardingStrategy strategy) {
        try {
            return run(call, inputs, "meta", false);
        } catch (RuntimeException e) {
            String message = String.valueOf(e.getMessage());
            boolean noMetaKernel = message.contains("Meta kernel") || message.contains("fake impl");
            if (!noMetaKernel) {
                throw new IllegalArgumentException(call.qualifiedName() + " does not take these inputs " + inputs + ": "
                    + firstLine(message), e);
            }
            if (strategy.outputShape(call, inputs) == null) {
                throw new UnsupportedOperationException(call.qualifiedName() + " has no meta kernel in libtorch, so its output shapes "
                    + "cannot be inferred exactly; it is not supported on distributed tensors yet");
            }
        }
        long[] shape = strategy.outputShape(call, inputs);
        ScalarType dtype = strategy.outputDtype(call, inputs);
        if (dtype != null) {
            return List.of(new Out(shape, dtype));
        }
        List<Out> ones = run(call, inputs, "cpu", true);
        List<Out> out = new ArrayList<>();
        for (Out o : ones) {
            if (o.shape().length != shape.length) {
                throw new IllegalStateException(call.qualifiedName() + " is listed as " + strategy.family() + " but gives " + o.shape().length
                    + " dimensions for inputs of the broadcast shape " + java.util.Arrays.toString(shape));
            }
            out.add(new Out(shape, o.dtype()));
        }
        return out;
    }

    /** Runs {@code call} on empty tensors of {@code device}: of the inputs' shapes, or of one element each ({@code ones}). */
    private static List<Out> run(AtenCall call, List<TensorMeta> inputs, String device, boolean ones) {
        List<Tensor> tensors = new ArrayList<>(inputs.size());
        List<Tensor> results = List.of();
        try (Device d = new Device(device)) {
            for (TensorMeta t : inputs) {
                long[] shape = ones ? new long[t.ndim()] : t.shape();
                if (ones) {
                    java.util.Arrays.fill(shape, 1);
                }
                try (TensorOptions options = new TensorOptions(d).dtype(new ScalarTypeOptional(t.dtype()));
                     MemoryFormatOptional format = new MemoryFormatOptional()) {
                    tensors.add(ones ? torch.ones(shape, options) : torch.empty(shape, options, format));
                }
            }
            results = call.call(tensors);
            List<Out> out = new ArrayList<>(results.size());
            for (Tensor r : results) {
                out.add(new Out(r.sizes().vec().get(), r.scalar_type().intern()));
            }
            return out;
        } finally {
            tensors.forEach(Tensor::close);
            results.forEach(Tensor::close);
        }
    }

    private static String firstLine(String message) {
        int cut = message.indexOf('\n');
        String line = cut < 0 ? message : message.substring(0, cut);
        int at = line.indexOf("Exception raised from");
        return at < 0 ? line : line.substring(0, at).trim();
    }
}
