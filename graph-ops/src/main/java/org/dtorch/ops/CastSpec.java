package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code to(dtype)}.
 *
 * <p>Sharding rule: S and R pass through; a partial placement only where the cast commutes with its
 * reduction ({@link Rules#castCommutes}): casting {@code P(sum)} parts 1 and -1 to bool would give
 * {@code True + True} where the tensor is {@code bool(0) = False}.
 *
 * <p>Thread-safe: immutable.
 */
public final class CastSpec implements OpSpec, ShardsPassThrough {
    private final ScalarType dtype;

    /** A conversion to {@code dtype}. */
    public CastSpec(ScalarType dtype) {
        this.dtype = Objects.requireNonNull(dtype, "to: dtype is null").intern();
    }

    @Override
    public String name() {
        return "to(" + TorchTensors.dtypeName(dtype) + ")";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        Rules.checkPartialCast(name(), inputs, t, dtype);
        return List.of(new TensorMeta(t.shape(), dtype, t.sharding()));
    }

    /**
     * Placements pass through, but a partial placement the cast does not commute with, which is reduced first: to
     * {@code R}, or to a shard where that costs less.
     */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        List<List<OptionSearch.Option>> options = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            List<OptionSearch.Option> dim = new ArrayList<>();
            if (!(p instanceof Partial partial) || Rules.castCommutes(partial.op(), t.dtype(), dtype)) {
                dim.add(new OptionSearch.Option(List.of(p), p));
            }
            dim.add(new OptionSearch.Option(List.of(Placement.replicate()), Placement.replicate()));
            for (int d = 0; d < t.ndim(); d++) {
                if (t.size(d) >= t.sharding().mesh().size(m)) {
                    dim.add(new OptionSearch.Option(List.of(Placement.shard(d)), Placement.shard(d)));
                }
            }
            options.add(dim);
        }
        return OptionSearch.cheapest(name(), inputs, options, 1);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new LocalKernel(in -> in.getFirst().to(dtype));
    }

    public ScalarType dtype() {
        return dtype;
    }
}
