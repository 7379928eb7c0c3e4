package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code softmax(dim)} of a floating-point tensor.
 *
 * <p>Sharding rule: the softmax dimension must be whole on every device: {@code S(dim)} and partial values
 * are rejected; every other shard and {@code R} pass through.
 *
 * <p>Thread-safe: immutable.
 */
public final class SoftmaxSpec implements OpSpec {
    private final int dim;

    /** A softmax over {@code dim}. */
    public SoftmaxSpec(int dim) {
        this.dim = dim;
    }

    @Override
    public String name() {
        return "softmax";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        int d = Rules.normalizeDim(name(), dim, t.ndim());
        if (!Rules.isFloating(t.dtype())) {
            throw new IllegalArgumentException("softmax needs a floating-point tensor, got " + t);
        }
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            if (p.isShard(d) || p.isPartial()) {
                throw Rules.reject(name(), inputs, m, p + " splits or sums the softmax dimension " + d,
                    "R, or S on a dimension other than " + d);
            }
        }
        return List.of(t);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        int d = Rules.normalizeDim(name(), dim, op.inputs().getFirst().meta().ndim());
        return new LocalKernel(in -> in.getFirst().softmax(d));
    }

    int dim() {
        return dim;
    }
}
