package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)}: query
 * {@code (..., L, E)}, key {@code (..., S, E)}, value {@code (..., S, Ev)}, output {@code (..., L, Ev)}; the leading
 * dimensions are batch and heads ({@code (N, H, L, E)} in the common case). Attention is independent per leading
 * index, so per mesh dimension:
 * <ul>
 *   <li>the first of query, key, value sharded on a leading dimension {@code d} that all three hold at the same size
 *       selects {@code S(d)} for all three and for the output; the mask follows where it holds {@code d} at that size
 *       and is {@code R} where it broadcasts along it;</li>
 *   <li>otherwise everything {@code R}: sequence and embedding shards are gathered, partial values reduced (attention
 *       is not linear).</li>
 * </ul>
 * With {@code enable_gqa} and fewer key/value heads than query heads the heads dimension stays sharded only where the
 * devices that split it divide both head counts evenly: every device then holds whole query groups with their key/value
 * heads (uneven shards would give a device query heads whose key/value head another shard holds), else it is gathered. {@code dropout_p} must be 0:
 * each device would draw its own dropout mask. {@code is_causal} needs nothing: each device holds whole sequences.
 * libtorch has no meta kernel for attention on this build; the output shape is {@code query}'s with {@code value}'s last
 * dimension, after the checks libtorch makes of the shapes.
 *
 * <p>Stateless. Thread-safe.
 */
final class AttentionStrategy implements ShardingStrategy {
    static final AttentionStrategy INSTANCE = new AttentionStrategy();

    /** The operators of the family, by name. */
    static final Set<String> NAMES = Set.of("scaled_dot_product_attention");

    private AttentionStrategy() {
    }

    @Override
    public String family() {
        return "attention";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R for all inputs; query, key and value S(d) on the same leading (batch or heads) dimension, "
            + "with attn_mask S on that dimension or R where it broadcasts along it";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        Object dropout = call.constant("dropout_p");
        if (dropout instanceof Number p && p.doubleValue() != 0) {
            throw new UnsupportedOperationException(call.qualifiedName() + ": dropout_p=" + p + " draws random numbers, which the "
                + "generic distributed path cannot yet draw consistently across devices; use dropout_p=0");
        }
        List<String> names = call.inputNames();
        int[] qkv = {names.indexOf("query"), names.indexOf("key"), names.indexOf("value")};
        int mask = names.indexOf("attn_mask");
        TensorMeta q = inputs.get(qkv[0]);
        int meshDims = q.placements().size();
        List<List<Placement>> in = ShardingStrategy.replicatedInputs(inputs.size(), meshDims);
        List<Placement> out = new ArrayList<>();
        boolean gqa = Boolean.TRUE.equals(call.constant("enable_gqa"));
        int[] chosen = new int[meshDims];
        long headWays = 1;
        for (int m = 0; m < meshDims; m++) {
            chosen[m] = sharedLeadingShard(inputs, qkv, m, gqa);
            headWays *= chosen[m] == q.ndim() - 3 ? q.sharding().mesh().size(m) : 1;
        }
        TensorMeta k = inputs.get(qkv[1]);
        boolean splitsGroups = gqa && q.ndim() >= 3 && k.ndim() == q.ndim() && k.size(q.ndim() - 3) != q.size(q.ndim() - 3)
            && (q.size(q.ndim() - 3) % headWays != 0 || k.size(q.ndim() - 3) % headWays != 0);
        for (int m = 0; m < meshDims; m++) {
            int d = splitsGroups && chosen[m] == q.ndim() - 3 ? -1 : chosen[m];
            if (d < 0) {
                out.add(Placement.replicate());
                continue;
            }
            for (int i : qkv) {
                in.get(i).set(m, Placement.shard(d));
            }
            if (mask >= 0) {
                TensorMeta t = inputs.get(mask);
                int j = d - (q.ndim() - t.ndim());
                if (j >= 0 && t.size(j) == q.size(d)) {
                    in.get(mask).set(m, Placement.shard(j));
                }
            }
            out.add(Placement.shard(d));
        }
        return new Decision(in, Collections.nCopies(outputs, out));
    }

    /**
     * The leading dimension that the first of query, key, value sharded on mesh dimension {@code m} shards, if all hold it
     * alike (with {@code gqa}, key and value heads may be a divisor of the query's); else -1.
     */
    private static int sharedLeadingShard(List<TensorMeta> inputs, int[] qkv, int m, boolean gqa) {
        TensorMeta q = inputs.get(qkv[0]);
        for (int i : qkv) {
            int d = Rules.shardDim(inputs.get(i).placement(m));
            if (d < 0 || d >= q.ndim() - 2) {
                continue;
            }
            for (int j : qkv) {
                TensorMeta t = inputs.get(j);
                boolean grouped = gqa && d == q.ndim() - 3 && t.size(d) > 0 && q.size(d) % t.size(d) == 0;
                if (t.ndim() != q.ndim() || t.size(d) != q.size(d) && !grouped) {
                    return -1;
                }
            }
            return d;
        }
        return -1;
    }

    /** {@code query}'s shape with {@code value}'s last dimension, after checking the shapes as libtorch does. */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        List<String> names = call.inputNames();
        TensorMeta q = inputs.get(names.indexOf("query"));
        TensorMeta k = inputs.get(names.indexOf("key"));
        TensorMeta v = inputs.get(names.indexOf("value"));
        int n = q.ndim();
        boolean fits = n >= 2 && k.ndim() == n && v.ndim() == n && k.size(n - 1) == q.size(n - 1) && v.size(n - 2) == k.size(n - 2);
        for (int d = 0; fits && d < n - 2; d++) {
            boolean gqaHeads = d == n - 3 && Boolean.TRUE.equals(call.constant("enable_gqa")) && q.size(d) % k.size(d) == 0;
            fits = k.size(d) == v.size(d) && (k.size(d) == q.size(d) || gqaHeads);
        }
        if (!fits) {
            throw new IllegalArgumentException(call.qualifiedName() + ": query " + Arrays.toString(q.shape()) + ", key "
                + Arrays.toString(k.shape()) + " and value " + Arrays.toString(v.shape()) + " do not fit (..., L, E), (..., S, E), "
                + "(..., S, Ev) with the same leading dimensions (or, with enable_gqa, query heads a multiple of key heads)");
        }
        int mask = names.indexOf("attn_mask");
        if (mask >= 0) {
            long[] scores = q.shape().clone();
            scores[n - 1] = k.size(n - 2);
            if (!Arrays.equals(Rules.broadcast(call.qualifiedName(), inputs.get(mask).shape(), scores), scores)) {
                throw new IllegalArgumentException(call.qualifiedName() + ": attn_mask " + Arrays.toString(inputs.get(mask).shape())
                    + " does not broadcast to the attention scores " + Arrays.toString(scores));
            }
        }
        long[] shape = q.shape().clone();
        shape[n - 1] = v.size(n - 1);
        return shape;
    }
}
