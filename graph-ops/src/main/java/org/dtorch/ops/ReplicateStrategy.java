package org.dtorch.ops;

import java.util.Collections;
import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * The fallback for operators without a strategy: every input replicated on every mesh dimension, every device computes
 * the whole result, which is replicated. Always correct for deterministic operators (random ones are refused before a
 * strategy is chosen), at the cost of gathering every sharded input and all-reducing every partial one.
 *
 * <p>Stateless. Thread-safe.
 */
final class ReplicateStrategy implements ShardingStrategy {
    static final ReplicateStrategy INSTANCE = new ReplicateStrategy();

    private ReplicateStrategy() {
    }

    @Override
    public String family() {
        return "replicate";
    }

    @Override
    public String legal() {
        return "R on every mesh dimension for every input";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        int meshDims = inputs.getFirst().placements().size();
        List<Placement> all = Collections.nCopies(meshDims, Placement.replicate());
        return new Decision(Collections.nCopies(inputs.size(), all), Collections.nCopies(outputs, all));
    }
}
