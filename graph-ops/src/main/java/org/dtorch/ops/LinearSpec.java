package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code linear(x, weight, bias)}: {@code x W^T + b} for {@code x: [..., in]}, {@code weight: [out, in]},
 * optional {@code bias: [out]}, as {@code torch.nn.functional.linear}.
 *
 * <p>Sharding rule, per mesh dimension: {@code R, R, R -> R}; {@code S(batch dim of x), R, R -> S(same)};
 * column-parallel {@code R, S(0), S(0) -> S(last)}; row-parallel {@code S(last), S(1), R -> P(sum)};
 * {@code P(sum), R, R -> P(sum)}. Where the result is partial the bias is added on coordinate 0 of that mesh
 * dimension only, so the reduction adds it once.
 *
 * <p>Thread-safe: immutable.
 */
public final class LinearSpec implements OpSpec {
    private static final String LEGAL = "per mesh dimension (x, weight, bias): R, R, R; S(a batch dim), R, R; "
        + "R, S(0), S(0) (column-parallel); S(last), S(1), R (row-parallel, giving P(sum)); P(sum), R, R";

    private final boolean hasBias;

    /** A linear layer with or without bias. */
    public LinearSpec(boolean hasBias) {
        this.hasBias = hasBias;
    }

    @Override
    public String name() {
        return "linear";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, hasBias ? 3 : 2);
        TensorMeta x = inputs.get(0);
        TensorMeta w = inputs.get(1);
        TensorMeta b = hasBias ? inputs.get(2) : null;
        DeviceMesh mesh = Rules.sameMesh(name(), inputs);
        if (x.ndim() < 1 || w.ndim() != 2 || x.size(x.ndim() - 1) != w.size(1) || (b != null && (b.ndim() != 1 || b.size(0) != w.size(0)))) {
            throw new IllegalArgumentException("linear: x " + Arrays.toString(x.shape()) + ", weight " + Arrays.toString(w.shape())
                + (b == null ? "" : ", bias " + Arrays.toString(b.shape())) + " do not fit (weight is [out, in], bias [out])");
        }
        long[] shape = x.shape().clone();
        shape[shape.length - 1] = w.size(0);
        Rules.numel(name(), shape);
        int last = x.ndim() - 1;
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < mesh.ndim(); m++) {
            Placement px = x.placement(m);
            Placement pw = w.placement(m);
            Placement pb = b == null ? Placement.replicate() : b.placement(m);
            int dx = Rules.shardDim(px);
            Placement result;
            if (px.isReplicate() && pw.isReplicate() && pb.isReplicate()) {
                result = Placement.replicate();
            } else if (dx >= 0 && dx < last && pw.isReplicate() && pb.isReplicate()) {
                result = Placement.shard(dx);
            } else if (px.isReplicate() && pw.isShard(0) && (b == null || pb.isShard(0))) {
                result = Placement.shard(shape.length - 1);
            } else if (dx == last && pw.isShard(1) && pb.isReplicate()) {
                result = Placement.partial();
            } else if (Rules.isPartialSum(px) && pw.isReplicate() && pb.isReplicate()) {
                result = Placement.partial();
            } else {
                throw Rules.reject(name(), inputs, m, "x " + px + ", weight " + pw + (b == null ? "" : ", bias " + pb)
                    + " is not a layout this layer can compute locally", LEGAL);
            }
            out.add(result);
        }
        return List.of(new TensorMeta(shape, Rules.promote(x.dtype(), w.dtype()), Rules.sharding(mesh, out)));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta result = op.outputs().getFirst().meta();
        DeviceMesh mesh = result.sharding().mesh();
        boolean addBias = hasBias;
        if (hasBias) {
            int[] coords = mesh.coordinates(deviceId);
            for (int m = 0; m < mesh.ndim(); m++) {
                if (result.placement(m).isPartial() && coords[m] != 0) {
                    addBias = false;
                }
            }
        }
        boolean withBias = addBias;
        return new LocalKernel(in -> {
            try (Tensor product = torch.linear(in.get(0), in.get(1))) {
                return withBias ? product.add(in.get(2)) : product.clone();
            }
        });
    }

    boolean hasBias() {
        return hasBias;
    }
}
