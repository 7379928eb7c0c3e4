package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
 * of element-wise operators, the kept dimensions of reductions, the input's shape for normalizations) and the dtype
 * from running the call on small CPU tensors with the inputs' dtypes and numbers of dimensions
 * ({@link ShardingStrategy#probeShapes}: one element each by default; type promotion and reduction dtypes depend only
 * on dtypes and on whether a tensor has zero dimensions, never on sizes). That run also has libtorch check the call.
 * The result's number of dimensions is checked against the rule's. Convolutions (libtorch picks the
 * {@code convolution_overrideable} backend for meta tensors), adaptive average pooling, 3-d max pooling and attention
 * have no meta kernel either; their strategies give the shape by formula. An operator whose outputs differ in shape
 * gets one shape each ({@link ShardingStrategy#outputShapes}: RMS norm's fused derivative, which has no CPU kernel to
 * probe either, so its strategy gives the dtype too). Other operators without a meta kernel are refused, naming the
 * operator.
 *
 * <p>Thread-safe: every inference makes and closes its own tensors; the cache of answers is guarded by itself.
 */
final class MetaInference {
    /** Shape and dtype of one output. */
    record Out(long[] shape, ScalarType dtype) {
    }

    private MetaInference() {
    }

    /** The inputs' shapes and dtypes a call's outputs depend on (not their placements). */
    private record Key(AtenCall call, long[][] shapes, ScalarType[] dtypes) {
        static Key of(AtenCall call, List<TensorMeta> inputs) {
            long[][] shapes = new long[inputs.size()][];
            ScalarType[] dtypes = new ScalarType[inputs.size()];
            for (int i = 0; i < shapes.length; i++) {
                TensorMeta t = inputs.get(i);
                long[] shape = new long[t.ndim()];
                for (int d = 0; d < shape.length; d++) {
                    shape[d] = t.size(d);
                }
                shapes[i] = shape;
                dtypes[i] = t.dtype();
            }
            return new Key(call, shapes, dtypes);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.call.equals(call) && Arrays.deepEquals(k.shapes, shapes) && Arrays.equals(k.dtypes, dtypes);
        }

        @Override
        public int hashCode() {
            return (call.hashCode() * 31 + Arrays.deepHashCode(shapes)) * 31 + Arrays.hashCode(dtypes);
        }
    }

    /**
     * Answers already found, most recently used last; at most {@value #CACHED}, so that the client's thread runs no
     * meta tensors for a call it has seen. Guarded by itself.
     */
    private static final Map<Key, List<Out>> CACHE = new LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Key, List<Out>> eldest) {
            return size() > CACHED;
        }
    };
    private static final int CACHED = 4096;

    /**
     * The outputs of {@code call} on global tensors of {@code inputs}' shapes and dtypes: remembered per call and input
     * shapes and dtypes, since libtorch's answer depends on nothing else; a refusal is not remembered, so its error
     * comes back every time.
     * The shapes returned are shared: read them, do not write them.
     */
    static List<Out> infer(AtenCall call, List<TensorMeta> inputs, ShardingStrategy strategy) {
        Key key = Key.of(call, inputs);
        synchronized (CACHE) {
            List<Out> known = CACHE.get(key);
            if (known != null) {
                return known;
            }
        }
        List<Out> found = List.copyOf(inferUncached(call, inputs, strategy));
        synchronized (CACHE) {
            CACHE.put(key, found);
        }
        return found;
    }

    private static List<Out> inferUncached(AtenCall call, List<TensorMeta> inputs, ShardingStrategy strategy) {
        try {
            return run(call, inputs, "meta", null);
        } catch (RuntimeException e) {
            String message = String.valueOf(e.getMessage());
            boolean noMetaKernel = message.contains("Meta kernel") || message.contains("fake impl")
                || message.contains("convolution_overrideable not implemented");
            if (!noMetaKernel) {
                throw refused(call, inputs, e);
            }
        }
        // The family's rule: one shape per output, or one shape for them all.
        long[][] shapes = strategy.outputShapes(call, inputs);
        long[] shape = shapes == null ? strategy.outputShape(call, inputs) : null;
        if (shapes == null && shape == null) {
            throw new UnsupportedOperationException(call.qualifiedName() + " has no meta kernel in libtorch, so its output shapes "
                + "cannot be inferred exactly; it is not supported on distributed tensors yet");
        }
        ScalarType dtype = strategy.outputDtype(call, inputs);
        if (dtype != null) {
            if (shapes == null) {
                return List.of(new Out(shape, dtype));
            }
            return Arrays.stream(shapes).map(s -> new Out(s, dtype)).toList();
        }
        List<Out> ones;
        try {
            ones = run(call, inputs, "cpu", strategy.probeShapes(call, inputs));
        } catch (RuntimeException e) {
            throw refused(call, inputs, e);
        }
        if (shapes != null && ones.size() != shapes.length) {
            throw new IllegalStateException(call.qualifiedName() + " gives " + ones.size() + " outputs, its " + strategy.family()
                + " rule " + shapes.length);
        }
        List<Out> out = new ArrayList<>(ones.size());
        for (int i = 0; i < ones.size(); i++) {
            long[] rule = shapes == null ? shape : shapes[i];
            if (ones.get(i).shape().length != rule.length) {
                throw new IllegalStateException(call.qualifiedName() + " is listed as " + strategy.family() + " but gives "
                    + ones.get(i).shape().length + " dimensions where its rule gives " + Arrays.toString(rule));
            }
            out.add(new Out(rule, ones.get(i).dtype()));
        }
        return out;
    }

    private static IllegalArgumentException refused(AtenCall call, List<TensorMeta> inputs, RuntimeException e) {
        return new IllegalArgumentException(call.qualifiedName() + " does not take these inputs " + inputs + ": "
            + firstLine(String.valueOf(e.getMessage())), e);
    }

    /**
     * Runs {@code call} on tensors of {@code device}: empty ones of the inputs' shapes, or ones of the {@code probe}
     * shapes where given.
     */
    private static List<Out> run(AtenCall call, List<TensorMeta> inputs, String device, long[][] probe) {
        List<Tensor> tensors = new ArrayList<>(inputs.size());
        List<Tensor> results = List.of();
        try (Device d = new Device(device)) {
            for (int i = 0; i < inputs.size(); i++) {
                TensorMeta t = inputs.get(i);
                try (TensorOptions options = new TensorOptions(d).dtype(new ScalarTypeOptional(t.dtype()));
                     MemoryFormatOptional format = new MemoryFormatOptional()) {
                    tensors.add(probe != null ? torch.ones(probe[i], options) : torch.empty(t.shape(), options, format));
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
