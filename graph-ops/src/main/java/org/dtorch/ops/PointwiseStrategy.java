package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * Element-wise operators, with NumPy broadcasting: every output element depends only on the input elements at the same
 * (broadcast) index. Per mesh dimension an operator can run
 * <ul>
 *   <li>with every input {@code R}, giving {@code R};</li>
 *   <li>sharded on a result dimension {@code k}: every input that holds {@code k} at full size sharded on its own
 *       dimension aligned to {@code k}, every input broadcast along {@code k} (size 1 or absent) {@code R}, giving
 *       {@code S(k)};</li>
 *   <li>on partial sums, where the operator is linear in them: {@code add}/{@code sub}, {@code neg}, {@code positive},
 *       {@code clone} and {@code mul}/{@code div} by a Python number keep {@code P(sum)} with every tensor input
 *       {@code P(sum)} (a replicated one becomes partial locally: one holder keeps it, the others hold 0); {@code mul}
 *       of one partial tensor by replicated ones and {@code div} of a partial numerator by a replicated denominator keep
 *       it too.</li>
 * </ul>
 * Of these, the combination over the mesh dimensions whose input moves cost least wins ({@link OptionSearch}): inputs
 * that fit one stay as they are, a replicated input next to a sharded one is sliced locally, and a partial input of
 * an operator that is not linear in it is reduced, to a shard (a reduce-scatter) where that is cheaper than to
 * {@code R} (an all-reduce).
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
        return decide(call.qualifiedName(), inputs, outputShape(call, inputs), outputs);
    }

    /**
     * The cheapest placements for the element-wise operator {@code name} (a qualified overload name, which says whether
     * it is linear in partial values) of {@code inputs}, whose broadcast shape is {@code shape}: the hand-written
     * operators of the Java API share this rule.
     */
    static Decision decide(String name, List<TensorMeta> inputs, long[] shape, int outputs) {
        return OptionSearch.cheapest(name, inputs, options(name, inputs, shape), outputs);
    }

    /** The cheapest placements that keep input {@code pinned} and give the output its placements, or null. */
    @Override
    public Decision decidePinned(AtenCall call, List<TensorMeta> inputs, int pinned) {
        String name = call.qualifiedName();
        try {
            return OptionSearch.cheapest(name, inputs, options(name, inputs, outputShape(call, inputs)), 1, pinned);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    private static List<List<Option>> options(String name, List<TensorMeta> inputs, long[] shape) {
        int meshDims = inputs.getFirst().placements().size();
        List<List<Option>> options = new ArrayList<>(meshDims);
        for (int m = 0; m < meshDims; m++) {
            options.add(options(name, inputs, shape, m));
        }
        return options;
    }

    /**
     * The ways to run on mesh dimension {@code m}: every input {@code R}; each result dimension sharded (inputs that
     * hold it at full size sharded on it, inputs broadcast along it {@code R}); and, where an input is {@code P(sum)}
     * there, the partial sums kept as far as the operator is linear in them ({@code R} inputs of an operator linear in
     * all of them become {@code P(sum)} locally: one holder keeps the value, the others hold 0).
     */
    private static List<Option> options(String name, List<TensorMeta> inputs, long[] shape, int m) {
        int n = shape.length;
        int count = inputs.size();
        List<Option> out = new ArrayList<>();
        out.add(new Option(Collections.nCopies(count, Placement.replicate()), Placement.replicate()));
        int ways = inputs.getFirst().sharding().mesh().size(m);
        for (int k = 0; k < n; k++) {
            List<Placement> ps = new ArrayList<>(count);
            boolean held = false;
            for (TensorMeta t : inputs) {
                int j = k - (n - t.ndim());
                boolean full = j >= 0 && t.size(j) == shape[k];
                ps.add(full ? Placement.shard(j) : Placement.replicate());
                held |= full && t.placement(m).isShard(j);
            }
            // A dimension shorter than the split would leave devices idle: chosen only where an input is sharded so already.
            if (shape[k] >= ways || held) {
                out.add(new Option(ps, Placement.shard(k)));
            }
        }
        Placement partial = null;
        for (TensorMeta t : inputs) {
            if (Rules.isPartialSum(t.placement(m))) {
                partial = t.placement(m);
                break;
            }
        }
        if (partial == null) {
            return out;
        }
        if (LINEAR_ALL.contains(name)) {
            out.add(new Option(Collections.nCopies(count, partial), partial));
        } else if (LINEAR_ONE.contains(name) || LINEAR_FIRST.contains(name)) {
            for (int i = 0; i < (LINEAR_ONE.contains(name) ? count : 1); i++) {
                if (Rules.isPartialSum(inputs.get(i).placement(m))) {
                    List<Placement> ps = new ArrayList<>(Collections.nCopies(count, Placement.replicate()));
                    ps.set(i, partial);
                    out.add(new Option(ps, partial));
                }
            }
        }
        return out;
    }
}
