package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code index_add(self, dim, index, source, alpha)}: the slices of {@code source} along {@code dim} added (times
 * {@code alpha}) into the slices of {@code self} that {@code index} names: the gradient of an embedding's weight, one
 * row per looked-up index. It is linear in {@code self} and {@code source} together, and each slice is added alone, so
 * per mesh dimension:
 * <ul>
 *   <li>{@code self P(sum)} with {@code index S(0)} and {@code source S(dim)} (the same entries on each device) gives
 *       {@code P(sum)}: each device adds its own entries, as data parallelism splits the batch (the sum of the parts is
 *       the data-parallel gradient reduction);</li>
 *   <li>{@code self S(k)} and {@code source S(k)} on another dimension, with {@code R} indices, give {@code S(k)};</li>
 *   <li>{@code self S(dim)} with {@code R} indices and {@code source} gives {@code S(dim)}: each device adds the entries
 *       whose index falls in its slices (a vocabulary-parallel embedding's weight gradient), exact and local;</li>
 *   <li>{@code self P(sum)} and {@code source P(sum)} with {@code R} indices stay {@code P(sum)};</li>
 *   <li>otherwise every input is {@code R}.</li>
 * </ul>
 *
 * <p>Stateless. Thread-safe.
 */
final class IndexAddStrategy implements ShardingStrategy {
    static final IndexAddStrategy INSTANCE = new IndexAddStrategy();

    private IndexAddStrategy() {
    }

    @Override
    public String family() {
        return "index-add";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; self P(sum) with index S(0) and source S(dim); self and source S(k) off dim with R index; "
            + "self S(dim) with R index and source; self and source P(sum) with R index";
    }

    private static int dim(AtenCall call, TensorMeta self) {
        return Rules.normalizeDim(call.qualifiedName(), Math.toIntExact(((Number) call.constant("dim")).longValue()), Math.max(1, self.ndim()));
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        Rules.arity(call.qualifiedName(), inputs, 3);
        TensorMeta self = inputs.get(0);
        TensorMeta source = inputs.get(2);
        Placement r = Placement.replicate();
        Placement p = Placement.partial();
        int dim = dim(call, self);
        boolean aligned = self.ndim() > 0 && source.ndim() == self.ndim();
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < self.placements().size(); m++) {
            List<Option> here = new ArrayList<>();
            here.add(new Option(List.of(r, r, r), r));
            if (aligned) {
                here.add(new Option(List.of(p, Placement.shard(0), Placement.shard(dim)), p));
                for (int k = 0; k < self.ndim(); k++) {
                    if (k != dim) {
                        here.add(new Option(List.of(Placement.shard(k), r, Placement.shard(k)), Placement.shard(k)));
                    }
                }
                here.add(new Option(List.of(Placement.shard(dim), r, r), Placement.shard(dim)));
            }
            here.add(new Option(List.of(p, r, p), p));
            options.add(here);
        }
        return OptionSearch.cheapest(call.qualifiedName(), inputs, options, outputs);
    }

    /** Where {@code self}'s slices along {@code dim} are split, the masked addition of {@link SliceRangeKernel}. */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        TensorMeta self = op.inputs().getFirst().meta();
        if (self.ndim() == 0) {
            return null;
        }
        int dim = dim(call, self);
        if (self.placements().stream().noneMatch(pl -> pl.isShard(dim))) {
            return null;
        }
        ShardLayout layout = self.layout();
        long rows = layout.localShape(deviceId)[dim];
        if (rows == self.size(dim)) {
            return null;
        }
        return new SliceRangeKernel(call, dim, layout.offsets(deviceId)[dim], rows);
    }

    /**
     * The addition on a device that holds slices {@code [first, first + rows)} of {@code self} along {@code dim}: the
     * entries whose index falls there are added, at their local index; the others belong to other devices.
     */
    private record SliceRangeKernel(AtenCall call, int dim, long first, long rows) implements DeviceKernel {
        @Override
        public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
            Tensor self = inputs.get(0);
            Tensor index = inputs.get(1);
            Tensor source = inputs.get(2);
            try (Scalar offset = new Scalar(first); Scalar zero = new Scalar(0L); Scalar end = new Scalar(rows);
                 Tensor flat = index.reshape(-1); Tensor local = flat.sub(offset); Tensor low = local.ge(zero); Tensor high = local.lt(end);
                 Tensor mine = low.logical_and(high); Tensor kept = local.masked_select(mine); Tensor where = mine.nonzero();
                 Tensor positions = where.reshape(-1); Tensor slices = source.index_select(dim, positions)) {
                return call.call(List.of(self, kept, slices));
            }
        }
    }
}
