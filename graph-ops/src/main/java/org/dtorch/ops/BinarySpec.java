package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code add}, {@code sub}, {@code mul}, {@code div} of two tensors, with NumPy broadcasting and torch's
 * type promotion ({@code div} is true division: integers give float32).
 *
 * <p>Sharding rule, per mesh dimension: {@code R, R -> R}; {@code S(i), S(j) -> S(k)} when both shard the
 * same result dimension {@code k} at full size; {@code S, R -> S} when the replicated input is broadcast
 * (size 1 or absent) along that dimension; {@code P(sum), P(sum) -> P(sum)} for add and sub;
 * {@code P(sum), R -> P(sum)} for mul and div, and {@code R, P(sum) -> P(sum)} for mul.
 *
 * <p>Thread-safe: immutable.
 */
public final class BinarySpec implements OpSpec, PlacementChoice {
    /** The four operations. */
    public enum Kind { ADD, SUB, MUL, DIV }

    public static final BinarySpec ADD = new BinarySpec(Kind.ADD);
    public static final BinarySpec SUB = new BinarySpec(Kind.SUB);
    public static final BinarySpec MUL = new BinarySpec(Kind.MUL);
    public static final BinarySpec DIV = new BinarySpec(Kind.DIV);

    private final Kind kind;
    /** The operator's name, as every trace span and profile row of it reads it. */
    private final String name;
    /** The kernel of every operator of this kind on every device: it keeps nothing between calls. */
    private final DeviceKernel kernel;

    private BinarySpec(Kind kind) {
        this.kind = kind;
        this.name = kind.name().toLowerCase(java.util.Locale.ROOT);
        this.kernel = new LocalKernel(in -> {
            Tensor a = in.get(0);
            Tensor b = in.get(1);
            return switch (kind) {
                case ADD -> a.add(b);
                case SUB -> a.sub(b);
                case MUL -> a.mul(b);
                case DIV -> a.div(b);
            };
        });
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 2);
        TensorMeta a = inputs.get(0);
        TensorMeta b = inputs.get(1);
        DeviceMesh mesh = Rules.sameMesh(name(), inputs);
        long[] shape = Rules.broadcast(name(), a.shape(), b.shape());
        ScalarType dtype = Rules.resultType(a.dtype(), a.ndim() == 0, b.dtype(), b.ndim() == 0);
        if (kind == Kind.DIV && !Rules.isFloating(dtype)) {
            dtype = ScalarType.Float;
        }
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < mesh.ndim(); m++) {
            out.add(placement(inputs, m, a.placement(m), b.placement(m), shape));
        }
        return List.of(new TensorMeta(shape, dtype, Rules.sharding(mesh, out)));
    }

    /** Both inputs alike, neither partial, every sharded dimension of the same size in both: they fit as they are. */
    @Override
    public boolean fitsAsTheyAre(List<TensorMeta> inputs) {
        if (inputs.size() != 2) {
            return false;
        }
        TensorMeta a = inputs.get(0);
        TensorMeta b = inputs.get(1);
        List<Placement> pa = a.placements();
        if (a.ndim() != b.ndim() || !pa.equals(b.placements())) {
            return false;
        }
        for (Placement p : pa) {
            int d = Rules.shardDim(p);
            if (p.isPartial() || d >= 0 && a.size(d) != b.size(d)) {
                return false;
            }
        }
        return true;
    }

    /** The element-wise rule's cheapest placements ({@link PointwiseStrategy}), under the ATen overload of this kind. */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 2);
        Rules.sameMesh(name(), inputs);
        long[] shape = Rules.broadcast(name(), inputs.get(0).shape(), inputs.get(1).shape());
        return PointwiseStrategy.decide("aten::" + name() + ".Tensor", inputs, shape, 1);
    }

    private Placement placement(List<TensorMeta> inputs, int m, Placement pa, Placement pb, long[] shape) {
        TensorMeta a = inputs.get(0);
        TensorMeta b = inputs.get(1);
        int n = shape.length;
        String legal = legal();
        if (pa.isReplicate() && pb.isReplicate()) {
            return Placement.replicate();
        }
        int da = Rules.shardDim(pa);
        int db = Rules.shardDim(pb);
        if (da >= 0 || db >= 0) {
            if ((da >= 0 && !(db >= 0 || pb.isReplicate())) || (db >= 0 && !(da >= 0 || pa.isReplicate()))) {
                throw Rules.reject(name(), inputs, m, "a shard meets a partial value", legal);
            }
            int ka = da >= 0 ? da + (n - a.ndim()) : -1;
            int kb = db >= 0 ? db + (n - b.ndim()) : -1;
            if (ka >= 0 && kb >= 0) {
                if (ka != kb) {
                    throw Rules.reject(name(), inputs, m, "the inputs shard different result dimensions (" + ka + " and " + kb + ")", legal);
                }
                if (a.size(da) != b.size(db)) {
                    throw Rules.reject(name(), inputs, m, "a sharded dimension is broadcast", legal);
                }
                return Placement.shard(ka);
            }
            int k = ka >= 0 ? ka : kb;
            TensorMeta other = ka >= 0 ? b : a;
            if (Rules.dimFromRight(other.shape(), n, k) != 1) {
                throw Rules.reject(name(), inputs, m, "one input is sharded on result dimension " + k
                    + " and the other is replicated with the full dimension", legal);
            }
            return Placement.shard(k);
        }
        boolean partialA = Rules.isPartialSum(pa);
        boolean partialB = Rules.isPartialSum(pb);
        switch (kind) {
            case ADD, SUB -> {
                if (partialA && partialB) {
                    return pa;
                }
            }
            case MUL -> {
                if (partialA && pb.isReplicate() || partialB && pa.isReplicate()) {
                    return partialA ? pa : pb;
                }
            }
            case DIV -> {
                if (partialA && pb.isReplicate()) {
                    return pa;
                }
            }
        }
        throw Rules.reject(name(), inputs, m, "partial values " + pa + " and " + pb + " do not combine this way", legal);
    }

    private String legal() {
        String partial = switch (kind) {
            case ADD, SUB -> "P(sum) with P(sum)";
            case MUL -> "P(sum) with R (either side)";
            case DIV -> "P(sum) divided by R";
        };
        return "per mesh dimension, R with R; S on the same result dimension for both; S with an input broadcast along "
            + "that dimension (R); " + partial;
    }

    /** One shared, stateless kernel per kind, so that a worker allocates no kernel or lambda per operator. */
    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return kernel;
    }

    public Kind kind() {
        return kind;
    }

    static BinarySpec of(Kind kind) {
        return switch (kind) {
            case ADD -> ADD;
            case SUB -> SUB;
            case MUL -> MUL;
            case DIV -> DIV;
        };
    }
}
