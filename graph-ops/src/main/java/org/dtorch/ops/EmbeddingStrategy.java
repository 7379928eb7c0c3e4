package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code embedding(weight, indices, ...)}: rows of {@code weight (V, D)} picked by integer {@code indices} of any shape;
 * the output has shape {@code indices.shape + (D)}. Picking rows is linear in the weight and acts on each index alone,
 * so per mesh dimension:
 * <ul>
 *   <li>weight {@code S(1)} (columns) stays with {@code R} indices: the output is sharded on its last dimension;</li>
 *   <li>weight {@code P(sum)} stays with {@code R} indices: the output is {@code P(sum)} (a partial sum of rows);</li>
 *   <li>weight {@code S(0)} (rows) stays with {@code R} indices: each device looks up the indices that fall in its
 *       rows and gives zero rows for the others, so the output is {@code P(sum)}, exact (one term of every sum is the
 *       row, the others are zeros);</li>
 *   <li>otherwise the weight is {@code R}, and a shard {@code S(d)} of the indices stays, giving {@code S(d)}; partial
 *       indices are reduced.</li>
 * </ul>
 * Keeping the weight's placement first is the cheaper choice when the weight is larger than the indices, as usual.
 *
 * <p>Stateless. Thread-safe.
 */
final class EmbeddingStrategy implements ShardingStrategy {
    static final EmbeddingStrategy INSTANCE = new EmbeddingStrategy();

    private EmbeddingStrategy() {
    }

    @Override
    public String family() {
        return "embedding";
    }

    @Override
    public String legal() {
        return "per mesh dimension: weight S(0), S(1) or P(sum) with R indices; weight R with R or S(d) indices";
    }

    /** {@code indices.shape + (D)}. */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        Rules.arity(call.qualifiedName(), inputs, 2);
        TensorMeta weight = inputs.get(0);
        if (weight.ndim() != 2) {
            throw new IllegalArgumentException(call.qualifiedName() + ": weight must be 2-D (num_embeddings, embedding_dim), got " + weight);
        }
        long[] indices = inputs.get(1).shape();
        long[] out = Arrays.copyOf(indices, indices.length + 1);
        out[indices.length] = weight.size(1);
        return out;
    }

    /** A weight of two rows, so that the probe's indices (ones) pick a row that exists. */
    @Override
    public long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        long[][] out = ShardingStrategy.super.probeShapes(call, inputs);
        out[0][0] = 2;
        return out;
    }

    /** Where the weight's rows are split, the masked lookup of {@link RowShardKernel}; else the call itself. */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        TensorMeta weight = op.inputs().getFirst().meta();
        if (weight.placements().stream().noneMatch(p -> p.isShard(0))) {
            return null;
        }
        ShardLayout layout = weight.layout();
        long rows = layout.localShape(deviceId)[0];
        if (rows == weight.shape()[0]) {
            return null; // the shard holds every row (a mesh dimension of one device): the plain lookup, one kernel
        }
        return new RowShardKernel(call, layout.offsets(deviceId)[0], rows);
    }

    /**
     * The lookup on a device that holds rows {@code [first, first + rows)} of the weight: indices outside them pick local
     * row 0 instead and their output rows are then set to zero, all through libtorch's kernels. A device whose shard
     * holds no row (a weight with fewer rows than the devices that split it) has nothing to pick: its partial value is
     * all zeros.
     */
    private record RowShardKernel(AtenCall call, long first, long rows) implements DeviceKernel {
        @Override
        public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
            Tensor weight = inputs.get(0);
            Tensor indices = inputs.get(1);
            if (rows == 0) {
                long[] shape = Arrays.copyOf(TorchTensors.shape(indices), (int) indices.dim() + 1);
                shape[shape.length - 1] = weight.size(1);
                return List.of(torch.zeros(shape, weight.options()));
            }
            try (Scalar offset = new Scalar(first); Scalar zero = new Scalar(0L); Scalar end = new Scalar(rows); Scalar none = new Scalar(0.0);
                 Tensor local = indices.sub(offset); Tensor below = local.lt(zero); Tensor above = local.ge(end);
                 Tensor outside = below.logical_or(above); Tensor safe = local.masked_fill(outside, zero);
                 Tensor rowsOutside = outside.unsqueeze(-1)) {
                List<Tensor> picked = call.call(List.of(weight, safe));
                try (Tensor all = picked.getFirst()) {
                    return List.of(all.masked_fill(rowsOutside, none));
                }
            }
        }
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        Rules.arity(call.qualifiedName(), inputs, 2);
        TensorMeta weight = inputs.get(0);
        TensorMeta indices = inputs.get(1);
        List<Placement> w = new ArrayList<>();
        List<Placement> x = new ArrayList<>();
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < weight.placements().size(); m++) {
            Placement p = weight.placement(m);
            Placement q = indices.placement(m);
            if (p.isShard(0) || p.isShard(1) || Rules.isPartialSum(p)) {
                w.add(p);
                x.add(Placement.replicate());
                out.add(p.isShard(1) ? Placement.shard(indices.ndim()) : Placement.partial());
            } else {
                Placement kept = q.isShard() ? q : Placement.replicate();
                w.add(Placement.replicate());
                x.add(kept);
                out.add(kept);
            }
        }
        return new Decision(List.of(w, x), Collections.nCopies(outputs, out));
    }
}
