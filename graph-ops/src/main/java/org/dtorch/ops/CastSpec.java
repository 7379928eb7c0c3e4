package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code to(dtype)}.
 *
 * <p>Sharding rule: S and R pass through; a partial placement only where the cast commutes with its
 * reduction ({@link Rules#castCommutes}): casting {@code P(sum)} parts 1 and -1 to bool would give
 * {@code True + True} where the tensor is {@code bool(0) = False}.
 *
 * <p>Thread-safe: immutable.
 */
public final class CastSpec implements OpSpec {
    private final ScalarType dtype;

    /** A conversion to {@code dtype}. */
    public CastSpec(ScalarType dtype) {
        this.dtype = Objects.requireNonNull(dtype, "to: dtype is null").intern();
    }

    @Override
    public String name() {
        return "to(" + TorchTensors.dtypeName(dtype) + ")";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        Rules.checkPartialCast(name(), inputs, t, dtype);
        return List.of(new TensorMeta(t.shape(), dtype, t.sharding()));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new LocalKernel(in -> in.getFirst().to(dtype));
    }

    ScalarType dtype() {
        return dtype;
    }
}
