package org.dtorch.ops;

import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code to(dtype)}.
 *
 * <p>Sharding rule: placements pass through, except that partial values cannot be cast from floating point
 * to an integral type (the rounding of each part would not add up).
 *
 * <p>Thread-safe: immutable.
 */
public final class CastSpec implements OpSpec {
    private final ScalarType dtype;

    /** A conversion to {@code dtype}. */
    public CastSpec(ScalarType dtype) {
        this.dtype = dtype.intern();
    }

    @Override
    public String name() {
        return "to(" + TorchTensors.dtypeName(dtype) + ")";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        for (int m = 0; m < t.placements().size(); m++) {
            if (t.placement(m).isPartial() && Rules.isFloating(t.dtype()) && !Rules.isFloating(dtype)) {
                throw Rules.reject(name(), inputs, m, "partial floating-point values would be rounded one by one",
                    "S or R; P only to a floating-point dtype");
            }
        }
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
