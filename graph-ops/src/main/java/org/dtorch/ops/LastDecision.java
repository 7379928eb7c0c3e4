package org.dtorch.ops;

import java.util.List;
import java.util.function.Function;
import org.dtorch.core.graph.TensorMeta;

/**
 * A spec's last placement decision and the inputs it was made for. One operator asks its spec twice for the same
 * inputs (the implicit moves' fit, then the client's inference); the second question is answered here, by the inputs'
 * identity, without hashing them into a cache again.
 *
 * <p>Thread-safe: one immutable entry, replaced whole.
 */
final class LastDecision {
    private volatile Entry last;

    private record Entry(List<TensorMeta> inputs, ShardingStrategy.Decision decision) {
        boolean isFor(List<TensorMeta> metas) {
            if (metas.size() != inputs.size()) {
                return false;
            }
            for (int i = 0; i < metas.size(); i++) {
                if (metas.get(i) != inputs.get(i)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** The decision for {@code inputs}: the last one if it was made for these very inputs, else {@code decide}'s, kept. */
    ShardingStrategy.Decision of(List<TensorMeta> inputs, Function<List<TensorMeta>, ShardingStrategy.Decision> decide) {
        Entry entry = last;
        if (entry != null && entry.isFor(inputs)) {
            return entry.decision();
        }
        ShardingStrategy.Decision decision = decide.apply(inputs);
        last = new Entry(List.copyOf(inputs), decision);
        return decision;
    }
}
