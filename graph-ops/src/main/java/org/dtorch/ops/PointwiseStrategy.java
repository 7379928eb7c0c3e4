package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * Element-wise operators, with NumPy broadcasting: every output element depends only on the input elements at the same
 * (broadcast) index. Per mesh dimension:
 * <ul>
 *   <li>Shards: the first input sharded on a result dimension {@code k} it holds at full size decides {@code S(k)};
 *       every input that holds {@code k} at full size must be sharded on its own dimension aligned to {@code k}, every
 *       input broadcast along {@code k} (size 1 or absent) must be {@code R}. The output is {@code S(k)}.
 *       Inputs sharded elsewhere are moved (all-to-all), replicated ones are sliced locally.</li>
 *   <li>Partial values: kept only where the operator is linear in them. {@code P(sum)} stays {@code P(sum)} for
 *       {@code add}/{@code sub} of partial tensors, {@code neg}, {@code positive}, {@code mul}/{@code div} by a
 *       Python number, {@code mul} of one partial tensor by replicated ones and {@code div} of a partial numerator by a
 *       replicated denominator. Otherwise partial inputs are reduced to {@code R} (an all-reduce).</li>
 *   <li>Otherwise {@code R}.</li>
 * </ul>
 *
 * <p>Stateless. Thread-safe.
 */
final class PointwiseStrategy implements ShardingStrategy {
    static final PointwiseStrategy INSTANCE = new PointwiseStrategy();

    /** Linear in every tensor input together: P(sum) inputs give P(sum). */
    private static final Set<String> LINEAR_ALL = Set.of("aten::add.Tensor", "aten::sub.Tensor", "aten::neg", "aten::positive",
        "aten::mul.Scalar", "aten::div.Scalar", "aten::clone");
    /** Linear in one input (any, for mul; the first, for div) when the others are replicated. */
    private static final Set<String> LINEAR_ONE = Set.of("aten::mul.Tensor");
    private static final Set<String> LINEAR_FIRST = Set.of("aten::div.Tensor");

    private PointwiseStrategy() {
    }

    @Override
    public String family() {
        return "pointwise";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R for all inputs; S on the same result dimension for every input that holds it at full size, "
            + "with R for inputs broadcast along it; P(sum) only for linear operators (add/sub of P(sum) tensors, neg, mul/div by a "
            + "number, mul of one P(sum) tensor by R, P(sum) divided by R)";
    }

    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        long[] shape = inputs.getFirst().shape();
        for (TensorMeta t : inputs.subList(1, inputs.size())) {
            shape = Rules.broadcast(call.qualifiedName(), shape, t.shape());
        }
        return shape;
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        String name = call.qualifiedName();
        long[] shape = outputShape(call, inputs);
        int n = shape.length;
        int meshDims = inputs.getFirst().placements().size();
        List<List<Placement>> in = new ArrayList<>();
        for (int i = 0; i < inputs.size(); i++) {
            in.add(new ArrayList<>(Collections.nCopies(meshDims, Placement.replicate())));
        }
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < meshDims; m++) {
            Placement partial = keptPartial(name, inputs, m);
            if (partial != null) {
                for (int i = 0; i < inputs.size(); i++) {
                    in.get(i).set(m, inputs.get(i).placement(m));
                }
                out.add(partial);
                continue;
            }
            int k = -1;
            for (TensorMeta t : inputs) {
                int d = Rules.shardDim(t.placement(m));
                if (d >= 0 && t.size(d) == shape[d + n - t.ndim()]) {
                    k = d + n - t.ndim();
                    break;
                }
            }
            if (k < 0) {
                out.add(Placement.replicate());
                continue;
            }
            for (int i = 0; i < inputs.size(); i++) {
                TensorMeta t = inputs.get(i);
                int j = k - (n - t.ndim());
                in.get(i).set(m, j >= 0 && t.size(j) == shape[k] ? Placement.shard(j) : Placement.replicate());
            }
            out.add(Placement.shard(k));
        }
        return new Decision(in, Collections.nCopies(outputs, out));
    }

    /** The partial placement the output keeps on mesh dimension {@code m} when every input may stay as it is, or null. */
    private static Placement keptPartial(String name, List<TensorMeta> inputs, int m) {
        int partials = 0;
        int replicated = 0;
        int firstPartial = -1;
        for (int i = 0; i < inputs.size(); i++) {
            Placement p = inputs.get(i).placement(m);
            if (Rules.isPartialSum(p)) {
                partials++;
                firstPartial = firstPartial < 0 ? i : firstPartial;
            } else if (p.isReplicate()) {
                replicated++;
            }
        }
        if (partials == 0 || partials + replicated != inputs.size()) {
            return null;
        }
        boolean linear = LINEAR_ALL.contains(name) && partials == inputs.size()
            || LINEAR_ONE.contains(name) && partials == 1
            || LINEAR_FIRST.contains(name) && partials == 1 && firstPartial == 0;
        return linear ? inputs.get(firstPartial).placement(m) : null;
    }
}
