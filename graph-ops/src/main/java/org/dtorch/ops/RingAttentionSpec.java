package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.stream.IntStream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.group.RingAttention;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * Ring attention as an operator: torch's {@code scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale,
 * enable_gqa)} on query, key and value sharded on their sequence dimension, in torch's layout {@code [..., S, D]}
 * ({@code [B, H, S, D]} in the common case). Each device runs the per-rank {@link RingAttention} over the group of the
 * mesh dimensions that shard the sequence: its query rows stay, key/value blocks rotate, and the output is sharded like
 * the query. The blocks are the {@link ShardLayout} shards, so a sequence that does not divide over the ring gives
 * blocks of different lengths, and one shorter than the ring gives empty blocks; the kernel knows every block's global
 * offset, which is what the causal rule and the mask's key columns are read by.
 *
 * <p>Inputs are {@code q, k, v} and, optionally, {@code attn_mask} (boolean, float32 or the query's dtype, broadcastable to
 * the scores {@code [..., H, L, S]}). The mask is held on each device for the device's query rows and every key: its
 * placements are {@link #maskSharding}'s, which {@link #attend} moves it to. Legal: query, key and value on one mesh
 * with one placement list, {@code S(seq)} ({@code seq = ndim - 2}) on at least one mesh dimension, any other leading
 * dimension's shards on the others (each ring then runs on its own batch or heads), no {@code P} and no shard of the
 * last dimension; with grouped-query attention (fewer key than query heads) a heads shard must divide both head counts
 * evenly, so that every device holds whole query groups with their key heads. Everything is checked in
 * {@link #inferOutputs}, so a bad call fails in the client's thread before anything moves. {@link #attend} moves key,
 * value and mask to the placements the query needs first.
 *
 * <p>Thread-safe: immutable.
 */
public final class RingAttentionSpec implements OpSpec {
    private static final String LEGAL = "query, key and value with one placement list on one mesh, S(ndim - 2) (the sequence)"
        + " on at least one mesh dimension, no P and no S(ndim - 1); with enable_gqa, heads shards that divide the query and the"
        + " key heads evenly; an attn_mask sharded on its query rows like the query's sequence and on the query's leading"
        + " shards where it holds them, replicated elsewhere";

    private final boolean causal;
    private final double scale;
    private final boolean enableGqa;

    /** Ring attention, causal (top-left aligned, as torch's {@code is_causal}) or not, with the default scale. */
    public RingAttentionSpec(boolean causal) {
        this(causal, Double.NaN, false);
    }

    /**
     * Ring attention with torch's options.
     *
     * @param causal    top-left aligned causal masking; with a mask it is refused, as torch documents
     * @param scale     the scores' factor; {@code NaN} for {@code 1 / sqrt(E)}
     * @param enableGqa whether key and value may have fewer heads than the query, a divisor of its
     */
    public RingAttentionSpec(boolean causal, double scale, boolean enableGqa) {
        if (!Double.isNaN(scale) && !Double.isFinite(scale)) {
            throw new IllegalArgumentException("ring attention: scale must be finite, got " + scale);
        }
        this.causal = causal;
        this.scale = scale;
        this.enableGqa = enableGqa;
    }

    /** {@link #attend(DTensor, DTensor, DTensor, DTensor, boolean, double, boolean)} without mask, scale or grouped heads. */
    public static DTensor attend(DTensor q, DTensor k, DTensor v, boolean causal) {
        return attend(q, k, v, null, causal, Double.NaN, false);
    }

    /**
     * Ring attention of {@code q} against {@code k} and {@code v} (and {@code mask}, or null), which are first
     * redistributed to the placements {@code q}'s need where they differ (the intermediates are released once used).
     * Everything the operator checks is checked before that move.
     *
     * @throws ShardingException        when {@code q}'s placements are not legal (see the class comment)
     * @throws IllegalArgumentException when the shapes or dtypes do not fit
     */
    public static DTensor attend(DTensor q, DTensor k, DTensor v, DTensor mask, boolean causal, double scale, boolean enableGqa) {
        Objects.requireNonNull(q, "ring attention: query is null");
        Objects.requireNonNull(k, "ring attention: key is null");
        Objects.requireNonNull(v, "ring attention: value is null");
        RingAttentionSpec spec = new RingAttentionSpec(causal, scale, enableGqa);
        Sharding target = q.meta().sharding();
        spec.check(q, k, v, mask, target);
        List<DTensor> moved = new ArrayList<>(3);
        try {
            DTensor kq = like(k, target, moved);
            DTensor vq = like(v, target, moved);
            if (mask == null) {
                return q.runtime().apply(spec, q, kq, vq);
            }
            DTensor mq = like(mask, maskSharding(mask.meta(), target, q.ndim()), moved);
            return q.runtime().apply(spec, q, kq, vq, mq);
        } finally {
            moved.forEach(DTensor::close);
        }
    }

    /** {@link #check(DTensor, DTensor, DTensor, DTensor, Sharding)} without a mask. */
    public void check(DTensor q, DTensor k, DTensor v, Sharding target) {
        check(q, k, v, null, target);
    }

    /**
     * Checks, without moving anything, that ring attention could take {@code q}, {@code k}, {@code v} and {@code mask}
     * (or null) once the first three had {@code target}'s mesh and placements and the mask {@link #maskSharding}'s: for
     * a caller that moves them there itself (Ulysses' all-to-all before the ring, for instance) and must refuse before
     * communicating.
     *
     * @throws ShardingException        when {@code target}'s placements are not legal
     * @throws IllegalArgumentException when the shapes or dtypes do not fit
     */
    public void check(DTensor q, DTensor k, DTensor v, DTensor mask, Sharding target) {
        List<TensorMeta> metas = new ArrayList<>(List.of(q.meta().withSharding(target), k.meta().withSharding(target),
            v.meta().withSharding(target)));
        if (mask != null) {
            if (!mask.meta().sharding().mesh().sameDevicesAs(target.mesh())) {
                throw new IllegalArgumentException(name() + ": attn_mask must be on the query's mesh " + target.mesh() + ", got "
                    + mask.meta());
            }
            metas.add(mask.meta().withSharding(maskSharding(mask.meta(), target, q.ndim())));
        }
        inferOutputs(metas);
    }

    /**
     * Where a mask must be for a query of {@code queryNdim} dimensions placed by {@code query}: per mesh dimension, the
     * mask's query rows ({@code S(mask.ndim - 2)}) where the query's sequence is sharded and the mask holds every row,
     * the query's batch or heads shard where the mask holds that dimension whole (aligned from the right, as broadcasting
     * does), {@code R} elsewhere; the key columns are never sharded (every device meets every key block).
     */
    public static Sharding maskSharding(TensorMeta mask, Sharding query, int queryNdim) {
        List<Placement> out = new ArrayList<>(query.placements().size());
        int shift = queryNdim - mask.ndim();
        for (Placement p : query.placements()) {
            int d = Rules.shardDim(p);
            int j = d - shift;
            boolean held = d >= 0 && d < queryNdim - 1 && j >= 0 && j < mask.ndim() - 1 && mask.size(j) != 1;
            out.add(held ? Placement.shard(j) : Placement.replicate());
        }
        return new Sharding(query.mesh(), out);
    }

    private static DTensor like(DTensor t, Sharding target, List<DTensor> moved) {
        if (t.meta().sharding().equals(target)) {
            return t;
        }
        DTensor m = t.redistribute(target.mesh(), target.placements().toArray(Placement[]::new));
        moved.add(m);
        return m;
    }

    @Override
    public String name() {
        return "ring_attention";
    }

    /** Whether the attention is causal. */
    public boolean causal() {
        return causal;
    }

    /** The scores' factor, {@code NaN} for the default {@code 1 / sqrt(E)}. */
    public double scale() {
        return scale;
    }

    /** Whether key and value may have fewer heads than the query. */
    public boolean enableGqa() {
        return enableGqa;
    }

    @Override
    public boolean communicates() {
        return true;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (inputs.size() != 4) {
            Rules.arity(name(), inputs, 3);
        }
        Rules.sameMesh(name(), inputs);
        TensorMeta q = inputs.get(0);
        TensorMeta k = inputs.get(1);
        TensorMeta v = inputs.get(2);
        List<TensorMeta> qkv = inputs.subList(0, 3);
        int n = q.ndim();
        for (TensorMeta t : qkv) {
            if (t.ndim() != n || n < 2 || !Rules.isFloating(t.dtype()) || t.dtype() != q.dtype()) {
                throw new IllegalArgumentException(name() + ": query, key and value must be floating tensors [..., S, D] of one dtype"
                    + " and number of dimensions, got " + describe(inputs));
            }
        }
        if (!k.placements().equals(q.placements()) || !v.placements().equals(q.placements())) {
            throw new ShardingException(name(), inputs, "key and value must have the query's placements", LEGAL);
        }
        int[] ringDims = ringDims(q.sharding(), n);
        for (int m = 0; m < q.placements().size(); m++) {
            Placement p = q.placement(m);
            if (p instanceof Partial || p instanceof Shard s && s.dim() == n - 1) {
                throw Rules.reject(name(), inputs, m, p + " cannot be attended in place", LEGAL);
            }
        }
        if (ringDims.length == 0) {
            throw new ShardingException(name(), inputs, "no mesh dimension shards the sequence (dimension " + (n - 2)
                + "), so there is no ring; call the plain scaled_dot_product_attention", LEGAL);
        }
        long[] qs = q.shape();
        long[] ks = k.shape();
        long[] vs = v.shape();
        boolean grouped = enableGqa && n >= 3 && ks[n - 3] > 0 && ks[n - 3] != qs[n - 3] && qs[n - 3] % ks[n - 3] == 0;
        int leading = grouped ? n - 3 : n - 2;
        if (!Arrays.equals(qs, 0, leading, ks, 0, leading) || !Arrays.equals(ks, 0, n - 1, vs, 0, n - 1) || qs[n - 1] != ks[n - 1]
            || !grouped && !Arrays.equals(qs, 0, n - 2, ks, 0, n - 2)) {
            throw new IllegalArgumentException(name() + ": query [..., L, E], key [..., S, E] and value [..., S, Ev] need equal"
                + " leading sizes (with enable_gqa, query heads a multiple of key heads), got " + describe(inputs));
        }
        if (grouped) {
            checkWholeGroups(inputs, q, qs[n - 3], ks[n - 3]);
        }
        if (inputs.size() == 4) {
            if (causal) {
                throw new IllegalArgumentException(name() + ": an explicit attn_mask should not be set when is_causal is true, as torch"
                    + " documents; fold the causal rule into the mask, got " + describe(inputs));
            }
            checkMask(inputs, q, ks[n - 2]);
        }
        long[] out = qs.clone();
        out[n - 1] = vs[n - 1];
        return List.of(new TensorMeta(out, q.dtype(), q.sharding()));
    }

    /** Refuses a heads shard that would split a query group from its key head: both head counts must divide evenly. */
    private void checkWholeGroups(List<TensorMeta> inputs, TensorMeta q, long queryHeads, long keyHeads) {
        long ways = 1;
        for (int m = 0; m < q.placements().size(); m++) {
            if (Rules.shardDim(q.placement(m)) == q.ndim() - 3) {
                ways *= q.sharding().mesh().size(m);
            }
        }
        if (queryHeads % ways != 0 || keyHeads % ways != 0) {
            throw new ShardingException(name(), inputs, "grouped-query attention with " + queryHeads + " query and " + keyHeads
                + " key heads over " + ways + " devices would split a query group from its key head", LEGAL);
        }
    }

    private void checkMask(List<TensorMeta> inputs, TensorMeta q, long keyLength) {
        TensorMeta mask = inputs.get(3);
        ScalarType t = mask.dtype();
        if (t != ScalarType.Bool && t != ScalarType.Float && t != q.dtype()) {
            throw new IllegalArgumentException(name() + ": attn_mask must be boolean, float or the query's dtype, got " + mask);
        }
        long[] scores = q.shape().clone();
        scores[scores.length - 1] = keyLength;
        boolean fits = mask.ndim() <= scores.length;
        for (int i = 1; fits && i <= mask.ndim(); i++) {
            fits = mask.size(mask.ndim() - i) == 1 || mask.size(mask.ndim() - i) == scores[scores.length - i];
        }
        if (!fits) {
            throw new IllegalArgumentException(name() + ": attn_mask " + Arrays.toString(mask.shape()) + " does not broadcast to the"
                + " attention scores " + Arrays.toString(scores));
        }
        if (!mask.sharding().equals(maskSharding(mask, q.sharding(), q.ndim()))) {
            throw new ShardingException(name(), inputs, "attn_mask must have placements " + maskSharding(mask, q.sharding(), q.ndim())
                .placements() + " for the query's", LEGAL);
        }
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta q = op.inputs().get(0).meta();
        TensorMeta k = op.inputs().get(1).meta();
        DeviceMesh mesh = q.sharding().mesh();
        int[] ringDims = ringDims(q.sharding(), q.ndim());
        RingAttention.Blocks blocks = blocks(q, k, mesh.subMesh(deviceId, ringDims).deviceIds(), deviceId);
        RingAttention.Options options = new RingAttention.Options(causal, scale, enableGqa);
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                Tensor mask = inputs.size() > 3 ? inputs.get(3) : null;
                try (RingAttention ring = new RingAttention(ctx.groupOver(mesh, ringDims))) {
                    return Collections.singletonList(ring.forward(inputs.get(0), inputs.get(1), inputs.get(2), mask, blocks, options));
                }
            }
        };
    }

    /** Where {@code deviceId}'s query rows start and where every ring member's keys sit, from the shards' layouts. */
    private static RingAttention.Blocks blocks(TensorMeta q, TensorMeta k, List<Long> ring, long deviceId) {
        int seq = q.ndim() - 2;
        ShardLayout queries = ShardLayout.of(q.shape(), q.sharding());
        ShardLayout keys = ShardLayout.of(k.shape(), k.sharding());
        long[] offsets = new long[ring.size()];
        long[] lengths = new long[ring.size()];
        for (int r = 0; r < ring.size(); r++) {
            offsets[r] = keys.offsets(ring.get(r))[seq];
            lengths[r] = keys.localShape(ring.get(r))[seq];
        }
        return new RingAttention.Blocks(queries.offsets(deviceId)[seq], offsets, lengths);
    }

    /** The mesh dimensions that shard the sequence dimension {@code ndim - 2}, in mesh order. */
    private static int[] ringDims(Sharding sharding, int ndim) {
        List<Placement> placements = sharding.placements();
        return IntStream.range(0, placements.size())
            .filter(m -> placements.get(m) instanceof Shard s && s.dim() == ndim - 2).toArray();
    }

    private static String describe(List<TensorMeta> inputs) {
        return "query " + inputs.get(0) + ", key " + inputs.get(1) + ", value " + inputs.get(2)
            + (inputs.size() > 3 ? ", attn_mask " + inputs.get(3) : "");
    }

    @Override
    public String toString() {
        return "RingAttentionSpec(causal=" + causal + (Double.isNaN(scale) ? "" : ", scale=" + scale) + (enableGqa ? ", enable_gqa" : "")
            + ")";
    }
}
