package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code matmul(a, b)} for {@code a: [..., m, k]} and {@code b: [k, n]}, or two 3-D tensors with the same
 * batch size ({@code [B, m, k] x [B, k, n]}).
 *
 * <p>Sharding rule, per mesh dimension (the tensor-parallel rules): {@code R x R -> R};
 * {@code S(row or batch of a) x R -> S(same)} (for two 3-D tensors the batch needs {@code S(0) x S(0)});
 * {@code R x S(n) -> S(last)};
 * {@code S(k of a) x S(k of b) -> P(sum)}; {@code S(0) x S(0) -> S(0)} for the batch of two 3-D tensors;
 * {@code P(sum) x R -> P(sum)} and {@code R x P(sum) -> P(sum)}.
 *
 * <p>Thread-safe: immutable.
 */
public final class MatmulSpec implements OpSpec {
    public static final MatmulSpec INSTANCE = new MatmulSpec();

    private static final String LEGAL = "per mesh dimension, R x R; S(row or batch of a) x R; R x S(last of b); "
        + "S(last of a) x S(first of b) (giving P(sum)); S(0) x S(0) for a batched product; P(sum) x R; R x P(sum)";

    private MatmulSpec() {
    }

    @Override
    public String name() {
        return "matmul";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 2);
        TensorMeta a = inputs.get(0);
        TensorMeta b = inputs.get(1);
        DeviceMesh mesh = Rules.sameMesh(name(), inputs);
        boolean batched = a.ndim() == 3 && b.ndim() == 3;
        if (a.ndim() < 2 || !(b.ndim() == 2 || batched)) {
            throw new IllegalArgumentException("matmul: supports [..., m, k] x [k, n] and [B, m, k] x [B, k, n], got "
                + Arrays.toString(a.shape()) + " x " + Arrays.toString(b.shape()));
        }
        long k = a.size(a.ndim() - 1);
        if (k != b.size(b.ndim() - 2) || (batched && a.size(0) != b.size(0))) {
            throw new IllegalArgumentException("matmul: shapes " + Arrays.toString(a.shape()) + " and " + Arrays.toString(b.shape())
                + " do not match");
        }
        long[] shape = a.shape().clone();
        shape[shape.length - 1] = b.size(b.ndim() - 1);
        Rules.numel(name(), shape);
        int aK = a.ndim() - 1;
        int bK = b.ndim() - 2;
        int bN = b.ndim() - 1;
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < mesh.ndim(); m++) {
            Placement pa = a.placement(m);
            Placement pb = b.placement(m);
            int da = Rules.shardDim(pa);
            int db = Rules.shardDim(pb);
            Placement result;
            if (pa.isReplicate() && pb.isReplicate()) {
                result = Placement.replicate();
            } else if (da >= 0 && da < aK && pb.isReplicate() && !(batched && da == 0)) {
                result = Placement.shard(da);
            } else if (pa.isReplicate() && db == bN) {
                result = Placement.shard(shape.length - 1);
            } else if (da == aK && db == bK) {
                result = Placement.partial();
            } else if (batched && da == 0 && db == 0) {
                result = Placement.shard(0);
            } else if (Rules.isPartialSum(pa) && pb.isReplicate() || pa.isReplicate() && Rules.isPartialSum(pb)) {
                result = Placement.partial();
            } else {
                throw Rules.reject(name(), inputs, m, pa + " x " + pb + " is not a product this layout can compute locally", LEGAL);
            }
            out.add(result);
        }
        return List.of(new TensorMeta(shape, Rules.promote(a.dtype(), b.dtype()), Rules.sharding(mesh, out)));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new LocalKernel(in -> torch.matmul(in.get(0), in.get(1)));
    }
}
