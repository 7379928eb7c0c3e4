package org.dtorch.ops;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * The dropout operators in evaluation ({@code train=False}): the identity, so every placement stays as it is, partial
 * values included. The same operators in training draw random numbers and are refused by the {@link StrategyTable}
 * (dtorch's {@code nn.functional.dropout} draws the mask from a seeded factory instead).
 *
 * <p>Stateless. Thread-safe.
 */
final class DropoutStrategy implements ShardingStrategy {
    static final DropoutStrategy INSTANCE = new DropoutStrategy();

    /** The dropout operators whose {@code train} flag makes them random; in evaluation they return their input. */
    static final Set<String> NAMES = Set.of("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout");

    private DropoutStrategy() {
    }

    /** True when {@code call} is a dropout operator in evaluation. */
    static boolean isIdentity(AtenCall call) {
        return NAMES.contains(call.overload().name()) && Boolean.FALSE.equals(call.constant("train"));
    }

    @Override
    public String family() {
        return "dropout";
    }

    @Override
    public String legal() {
        return "any placements (the identity in evaluation)";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        TensorMeta x = inputs.getFirst();
        return new Decision(List.of(x.placements()), Collections.nCopies(outputs, x.placements()));
    }
}
