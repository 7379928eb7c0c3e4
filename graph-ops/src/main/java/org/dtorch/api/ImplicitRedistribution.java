package org.dtorch.api;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.FallbackWarnings;
import org.dtorch.ops.PlacementChoice;
import org.dtorch.ops.RedistributeAllSpec;
import org.dtorch.ops.RedistributeSpec;
import org.dtorch.ops.ShardingStrategy;

/**
 * The one place where an operator's inputs are moved to placements it can take ({@link PlacementChoice}), for the
 * hand-written operators and the generic ATen path alike, and the one place that reads the strict mode. The moves are
 * ordinary operators added before the one they serve ({@link RedistributeSpec#implicit}, or one
 * {@link RedistributeAllSpec} for several inputs, whose partial sums on one group are reduced together), so traces, the
 * profiler and graph dumps show them, named {@code redistribute (implicit, for <operator>)}.
 *
 * <p>In strict mode nothing is moved: the operator refuses inputs that fit none of its strategies with its own message
 * (the hand-written ones), or with one that names the placements the strategy runs with (the generic path).
 *
 * <p>Not thread-safe but for {@link #setEnabled}: the client thread that owns the runtime fits inputs; the mode may be
 * changed from any thread and applies to the operators added after it.
 */
final class ImplicitRedistribution {
    private static final System.Logger LOG = System.getLogger(ImplicitRedistribution.class.getName());
    private final DTorch runtime;
    private volatile boolean enabled;

    ImplicitRedistribution(DTorch runtime, boolean enabled) {
        this.runtime = runtime;
        this.enabled = enabled;
    }

    boolean enabled() {
        return enabled;
    }

    void setEnabled(boolean value) {
        this.enabled = value;
    }

    /** The inputs an operator runs on, and the moved copies to release once it is added. */
    record Fitted(DTensor[] inputs, List<DTensor> moved) implements AutoCloseable {
        @Override
        public void close() {
            moved.forEach(DTensor::close);
        }
    }

    /** {@code inputs} as they are. */
    private static Fitted unchanged(DTensor[] inputs) {
        return new Fitted(inputs, List.of());
    }

    /**
     * {@code inputs} moved where {@code spec} runs them; unchanged when it is not a {@link PlacementChoice}, when they fit
     * already, or in strict mode (where a generic operator refuses them here). The caller adds the operator on
     * {@link Fitted#inputs()}, then closes the result.
     */
    Fitted fit(OpSpec spec, DTensor[] inputs) {
        if (!(spec instanceof PlacementChoice choice) || inputs == null || inputs.length == 0) {
            return unchanged(inputs);
        }
        if (!enabled && !(spec instanceof AtenSpec)) {
            return unchanged(inputs); // the operator's own inferOutputs refuses what it cannot take
        }
        List<TensorMeta> metas = new ArrayList<>(inputs.length);
        for (DTensor t : inputs) {
            if (t == null) {
                return unchanged(inputs); // the graph names the null input
            }
            t.ensureOpen();
            metas.add(t.meta());
        }
        if (choice.fitsAsTheyAre(metas)) {
            return unchanged(inputs);
        }
        ShardingStrategy.Decision decision = choice.choose(metas);
        List<Integer> moving = new ArrayList<>();
        for (int i = 0; i < inputs.length; i++) {
            if (!metas.get(i).placements().equals(decision.inputs().get(i))) {
                moving.add(i);
            }
        }
        if (moving.isEmpty()) {
            return unchanged(inputs);
        }
        if (!enabled) {
            AtenSpec aten = (AtenSpec) spec;
            int i = moving.getFirst();
            throw new ShardingException(aten.call().qualifiedName(), metas, "input " + i + " has placements " + metas.get(i).placements()
                + " where the " + aten.strategy().family() + " strategy runs with " + decision.inputs().get(i)
                + ", and implicit redistribution is off (strict mode): redistribute it first", aten.strategy().legal());
        }
        String operator = spec instanceof AtenSpec aten ? aten.call().qualifiedName() : spec.name();
        DTensor[] actual = inputs.clone();
        List<DTensor> moved = new ArrayList<>(moving.size());
        if (moving.size() == 1) {
            int i = moving.getFirst();
            actual[i] = runtime.apply(RedistributeSpec.implicit(new Sharding(inputs[i].mesh(), decision.inputs().get(i)), operator), inputs[i]);
            moved.add(actual[i]);
        } else {
            List<Sharding> targets = moving.stream().map(i -> new Sharding(inputs[i].mesh(), decision.inputs().get(i))).toList();
            DTensor[] sources = moving.stream().map(i -> inputs[i]).toArray(DTensor[]::new);
            List<DTensor> outputs = runtime.applyMulti(new RedistributeAllSpec(targets, operator), sources);
            for (int k = 0; k < moving.size(); k++) {
                actual[moving.get(k)] = outputs.get(k);
            }
            moved.addAll(outputs);
        }
        if (choice.isFallback() || LOG.isLoggable(System.Logger.Level.DEBUG)) {
            String moves = describe(metas, decision, moving);
            if (choice.isFallback()) {
                FallbackWarnings.warnOnce(operator, moves);
            }
            LOG.log(System.Logger.Level.DEBUG, () -> "dtorch: " + operator + " redistributes its inputs: " + moves);
        }
        return new Fitted(actual, moved);
    }

    private static String describe(List<TensorMeta> metas, ShardingStrategy.Decision decision, List<Integer> moving) {
        List<String> out = new ArrayList<>();
        for (int i : moving) {
            TensorMeta t = metas.get(i);
            List<Placement> target = decision.inputs().get(i);
            out.add("input " + i + " " + t.placements() + " -> " + target + " ("
                + RedistributionPlanner.plan(t.sharding(), new Sharding(t.sharding().mesh(), target), t.shape()) + ")");
        }
        return String.join("; ", out);
    }
}
