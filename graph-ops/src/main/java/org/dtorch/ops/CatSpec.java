package org.dtorch.ops;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code cat(tensors, dim)}: concatenation along {@code dim}; other dimensions must match; dtypes promote.
 *
 * <p>Sharding rule: every input has the same placements; the concatenation dimension is not sharded;
 * {@code P(sum)} is allowed (concatenation is linear).
 *
 * <p>Thread-safe: immutable.
 */
public final class CatSpec implements OpSpec {
    private final int dim;

    /** A concatenation along {@code dim}. */
    public CatSpec(int dim) {
        this.dim = dim;
    }

    @Override
    public String name() {
        return "cat";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (inputs.isEmpty()) {
            throw new IllegalArgumentException("cat needs at least one tensor");
        }
        Rules.sameMesh(name(), inputs);
        TensorMeta first = inputs.getFirst();
        int d = Rules.normalizeDim(name(), dim, first.ndim());
        long[] shape = first.shape();
        shape[d] = 0;
        ScalarType dtype = first.dtype();
        for (TensorMeta t : inputs) {
            if (t.ndim() != first.ndim()) {
                throw new IllegalArgumentException("cat: tensors of " + first.ndim() + " and " + t.ndim() + " dimensions");
            }
            for (int i = 0; i < t.ndim(); i++) {
                if (i != d && t.size(i) != first.size(i)) {
                    throw new IllegalArgumentException("cat: shapes " + Arrays.toString(first.shape()) + " and " + Arrays.toString(t.shape())
                        + " differ outside dimension " + d);
                }
            }
            if (!t.placements().equals(first.placements())) {
                throw new org.dtorch.core.graph.ShardingException(name(), inputs, "the inputs have different placements",
                    "the same placements for every input");
            }
            shape[d] += t.size(d);
            dtype = Rules.promote(dtype, t.dtype());
        }
        for (int m = 0; m < first.placements().size(); m++) {
            var p = first.placement(m);
            if (p.isShard(d) || (p.isPartial() && !Rules.isPartialSum(p))) {
                throw Rules.reject(name(), inputs, m, p + " on the concatenation dimension " + d + " or a non-sum partial",
                    "R, P(sum), or S on a dimension other than " + d);
            }
        }
        return List.of(new TensorMeta(shape, dtype, first.sharding()));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        int d = Rules.normalizeDim(name(), dim, op.inputs().getFirst().meta().ndim());
        ScalarType dtype = op.outputs().getFirst().meta().dtype();
        return new LocalKernel(in -> {
            Tensor[] parts = in.stream().map(t -> t.scalar_type().intern() == dtype ? new Tensor(t) : t.to(dtype)).toArray(Tensor[]::new);
            try (TensorVector vector = new TensorVector(parts); TensorArrayRef ref = new TensorArrayRef(vector)) {
                return torch.cat(ref, d);
            } finally {
                for (Tensor p : parts) {
                    p.close();
                }
            }
        });
    }

    int dim() {
        return dim;
    }
}
