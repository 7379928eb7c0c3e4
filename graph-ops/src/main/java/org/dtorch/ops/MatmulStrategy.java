package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * Matrix products ({@code mm}, {@code bmm}, {@code matmul}, {@code linear}, {@code dot}, {@code mv}, {@code outer},
 * {@code addmm}, {@code baddbmm}, {@code addmv}, {@code einsum}), read as einsum equations ({@link MatmulEquation}): {@code mm} is
 * {@code mk,kn->mn}, {@code matmul}'s batch dimensions broadcast like element-wise ones, {@code linear} is
 * {@code ...k,nk->...n} plus its bias. Per mesh dimension the strategy takes one of:
 * <ul>
 *   <li>{@code R} for every input: {@code R};</li>
 *   <li>one label sharded: every input holding it at full size sharded on that dimension, inputs broadcast along it
 *       {@code R} (not a label an input holds twice, an einsum diagonal). A label the output keeps gives {@code S} on the
 *       output's dimension ({@code (S(0), R) -> S(0)}, {@code (R, S(1)) -> S(1)} for {@code mm}); a contracted label gives
 *       {@code P(sum)} ({@code (S(1), S(0))}).</li>
 *   <li>{@code P(sum)} on one factor, the other factors {@code R}: {@code P(sum)} (a product is linear in each factor).</li>
 * </ul>
 * Where the output is {@code P(sum)} an added input (a bias, {@code addmm}'s {@code self}) must be {@code P(sum)} too,
 * so the reduction adds it once; the planner makes it so locally from {@code R}. Of all combinations over the mesh
 * dimensions the strategy takes the one whose redistribution of the inputs the planner prices lowest
 * ({@link OptionSearch}), so inputs that already fit one stay as they are (only the identity costs 0: the
 * search stops at the first such combination).
 *
 * <p>Stateless. Thread-safe.
 */
final class MatmulStrategy implements ShardingStrategy {
    static final MatmulStrategy INSTANCE = new MatmulStrategy();

    /** The operator names of the family. */
    static final Set<String> NAMES = Set.of("mm", "bmm", "matmul", "linear", "dot", "mv", "outer", "ger", "addmm", "baddbmm", "addmv",
        "einsum");

    private MatmulStrategy() {
    }

    @Override
    public String family() {
        return "matmul";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R for every input; S on one label (batch, row, column) for every input that holds it at full "
            + "size and R for inputs broadcast along it, giving S on the output's dimension of that label; S on the contracted "
            + "dimension of every factor, giving P(sum); P(sum) on one factor and R on the others, giving P(sum); an added input "
            + "(bias, self of addmm) is P(sum) wherever the output is";
    }

    /** The output's labels at their sizes ({@code dot} and 1-D {@code matmul} have no meta kernel in libtorch). */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        MatmulEquation eq = MatmulEquation.of(call, inputs);
        return eq.output().chars().mapToLong(c -> eq.size((char) c)).toArray();
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        MatmulEquation eq = MatmulEquation.of(call, inputs);
        int meshDims = inputs.getFirst().placements().size();
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < meshDims; m++) {
            options.add(options(eq, inputs, m));
        }
        try {
            return OptionSearch.cheapest(call.qualifiedName(), inputs, options, outputs);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(call.qualifiedName() + ": no placement of " + shapes(inputs) + " on mesh "
                + inputs.getFirst().sharding().mesh() + " fits the product (" + legal() + ")", e);
        }
    }

    /** The choices on mesh dimension {@code m}: replicate, each label sharded, each factor partial (if an input is). */
    private static List<Option> options(MatmulEquation eq, List<TensorMeta> inputs, int m) {
        int n = inputs.size();
        List<Option> out = new ArrayList<>();
        out.add(new Option(Collections.nCopies(n, Placement.replicate()), Placement.replicate()));
        for (char label : eq.labels().toCharArray()) {
            if (eq.repeated(label)) {
                continue;
            }
            long full = eq.size(label);
            int kept = eq.output().indexOf(label);
            List<Placement> ps = new ArrayList<>(n);
            boolean anySharded = false;
            for (int i = 0; i < n; i++) {
                int d = eq.inputs().get(i).indexOf(label);
                if (d >= 0 && inputs.get(i).size(d) == full && full > 1) {
                    ps.add(Placement.shard(d));
                    anySharded |= i != eq.added();
                } else {
                    ps.add(i == eq.added() && kept < 0 ? Placement.partial() : Placement.replicate());
                }
            }
            if (anySharded) {
                out.add(new Option(ps, kept >= 0 ? Placement.shard(kept) : Placement.partial()));
            }
        }
        if (inputs.stream().anyMatch(t -> Rules.isPartialSum(t.placement(m)))) {
            for (int f = 0; f < n; f++) {
                if (f == eq.added()) {
                    continue;
                }
                List<Placement> ps = new ArrayList<>(Collections.nCopies(n, Placement.replicate()));
                ps.set(f, Placement.partial());
                if (eq.added() >= 0) {
                    ps.set(eq.added(), Placement.partial());
                }
                out.add(new Option(ps, Placement.partial()));
            }
        }
        return out;
    }

    static String shapes(List<TensorMeta> inputs) {
        return inputs.stream().map(t -> Arrays.toString(t.shape())).toList().toString();
    }
}
