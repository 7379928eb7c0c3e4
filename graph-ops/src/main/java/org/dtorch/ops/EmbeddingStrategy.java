package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code embedding(weight, indices, ...)}: rows of {@code weight (V, D)} picked by integer {@code indices} of any shape;
 * the output has shape {@code indices.shape + (D)}. Picking rows is linear in the weight and acts on each index alone,
 * so per mesh dimension:
 * <ul>
 *   <li>weight {@code S(1)} (columns) stays with {@code R} indices: the output is sharded on its last dimension;</li>
 *   <li>weight {@code P(sum)} stays with {@code R} indices: the output is {@code P(sum)} (a partial sum of rows);</li>
 *   <li>otherwise the weight is {@code R} (a row shard {@code S(0)} is gathered: answering from local rows would
 *       need a mask and a second operator per device), and a shard {@code S(d)} of the indices stays, giving
 *       {@code S(d)}; partial indices are reduced.</li>
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
        return "per mesh dimension: weight S(1) or P(sum) with R indices; weight R with R or S(d) indices";
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
        long[] out = java.util.Arrays.copyOf(indices, indices.length + 1);
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
            if (p.isShard(1) || Rules.isPartialSum(p)) {
                w.add(p);
                x.add(Placement.replicate());
                out.add(p.isShard(1) ? Placement.shard(indices.ndim()) : p);
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
