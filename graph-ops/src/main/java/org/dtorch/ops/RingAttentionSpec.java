package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.stream.IntStream;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.group.RingAttention;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * Ring attention as an operator: {@code scaled_dot_product_attention(q, k, v, is_causal)} with the default scale on
 * query, key and value sharded on their sequence dimension, in torch's layout {@code [..., S, D]} ({@code [B, H, S, D]}
 * in the common case). Each device runs the per-rank {@link RingAttention} over the group of the mesh dimensions that
 * shard the sequence (row-major in mesh order, which is the order {@link org.dtorch.core.distributed.ShardLayout} gives
 * the sequence's blocks): its query rows stay, key/value blocks rotate, and the output is sharded like the query.
 *
 * <p>Legal inputs: query, key and value on one mesh with one placement list, {@code S(seq)} ({@code seq = ndim - 2}) on
 * at least one mesh dimension, any other dimension's shards on the others (each ring then runs on its own batch or
 * heads), no {@code P} and no shard of the last dimension; both sequence lengths divisible by the devices they are
 * split over (the ring needs equal blocks); for {@code causal} one sequence length for query and key. Everything is
 * checked in {@link #inferOutputs}, so a bad call fails in the client's thread before anything moves.
 * {@link #attend} moves key and value to the query's placements first.
 *
 * <p>Thread-safe: immutable.
 */
public final class RingAttentionSpec implements OpSpec {
    private static final String LEGAL = "query, key and value with one placement list on one mesh, S(ndim - 2) (the sequence)"
        + " on at least one mesh dimension, no P and no S(ndim - 1), sequences divisible by the devices they are split over";

    private final boolean causal;

    /** Ring attention, causal (top-left aligned, as torch's {@code is_causal}) or not. */
    public RingAttentionSpec(boolean causal) {
        this.causal = causal;
    }

    /**
     * Ring attention of {@code q} against {@code k} and {@code v}, which are first redistributed to {@code q}'s mesh and
     * placements where they differ (the intermediates are released once used). Everything the operator checks is
     * checked before that move.
     *
     * @throws ShardingException        when {@code q}'s placements are not legal (see the class comment)
     * @throws IllegalArgumentException when the shapes or dtypes do not fit
     */
    public static DTensor attend(DTensor q, DTensor k, DTensor v, boolean causal) {
        Objects.requireNonNull(q, "ring attention: query is null");
        Objects.requireNonNull(k, "ring attention: key is null");
        Objects.requireNonNull(v, "ring attention: value is null");
        RingAttentionSpec spec = new RingAttentionSpec(causal);
        Sharding target = q.meta().sharding();
        spec.check(q, k, v, target);
        List<DTensor> moved = new ArrayList<>(2);
        try {
            DTensor kq = like(k, target, moved);
            DTensor vq = like(v, target, moved);
            return q.runtime().apply(spec, q, kq, vq);
        } finally {
            moved.forEach(DTensor::close);
        }
    }

    /**
     * Checks, without moving anything, that ring attention could take {@code q}, {@code k} and {@code v} once all three
     * had {@code target}'s mesh and placements: for a caller that moves them there itself (Ulysses' all-to-all before the
     * ring, for instance) and must refuse before communicating.
     *
     * @throws ShardingException        when {@code target}'s placements are not legal
     * @throws IllegalArgumentException when the shapes or dtypes do not fit
     */
    public void check(DTensor q, DTensor k, DTensor v, Sharding target) {
        inferOutputs(List.of(q.meta().withSharding(target), k.meta().withSharding(target), v.meta().withSharding(target)));
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

    @Override
    public boolean communicates() {
        return true;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 3);
        Rules.sameMesh(name(), inputs);
        TensorMeta q = inputs.get(0);
        TensorMeta k = inputs.get(1);
        TensorMeta v = inputs.get(2);
        int n = q.ndim();
        for (TensorMeta t : inputs) {
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
        if (!Arrays.equals(qs, 0, n - 2, ks, 0, n - 2) || !Arrays.equals(ks, 0, n - 1, vs, 0, n - 1) || qs[n - 1] != ks[n - 1]) {
            throw new IllegalArgumentException(name() + ": query [..., L, E], key [..., S, E] and value [..., S, Ev] need equal"
                + " leading sizes, got " + describe(inputs));
        }
        if (causal && qs[n - 2] != ks[n - 2]) {
            throw new IllegalArgumentException(name() + ": causal ring attention needs query and key sequences of one length, got "
                + describe(inputs));
        }
        long ways = 1;
        for (int m : ringDims) {
            ways *= q.sharding().mesh().size(m);
        }
        if (qs[n - 2] % ways != 0 || ks[n - 2] % ways != 0) {
            throw new ShardingException(name(), inputs, "the ring needs equal sequence blocks, but the query's " + qs[n - 2]
                + " or the key's " + ks[n - 2] + " positions do not divide over the " + ways + " devices they are split over", LEGAL);
        }
        long[] out = qs.clone();
        out[n - 1] = vs[n - 1];
        return List.of(new TensorMeta(out, q.dtype(), q.sharding()));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta q = op.inputs().getFirst().meta();
        DeviceMesh mesh = q.sharding().mesh();
        int[] ringDims = ringDims(q.sharding(), q.ndim());
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                try (RingAttention ring = new RingAttention(ctx.groupOver(mesh, ringDims))) {
                    return Collections.singletonList(ring.forward(inputs.get(0), inputs.get(1), inputs.get(2), causal));
                }
            }
        };
    }

    /** The mesh dimensions that shard the sequence dimension {@code ndim - 2}, in mesh order. */
    private static int[] ringDims(Sharding sharding, int ndim) {
        List<Placement> placements = sharding.placements();
        return IntStream.range(0, placements.size())
            .filter(m -> placements.get(m) instanceof Shard s && s.dim() == ndim - 2).toArray();
    }

    private static String describe(List<TensorMeta> inputs) {
        return "query " + inputs.get(0) + ", key " + inputs.get(1) + ", value " + inputs.get(2);
    }

    @Override
    public String toString() {
        return "RingAttentionSpec(causal=" + causal + ")";
    }
}
