package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;

/**
 * An operator of one input that shards and replicas pass through as they are ({@code relu}, {@code t * 2},
 * {@code to(dtype)}, {@code sum(dim)}): only partial values may have to move, so an input with none fits without a
 * search.
 *
 * <p>Implementations are immutable. Thread-safe.
 */
interface ShardsPassThrough extends PlacementChoice {

    @Override
    default boolean fitsAsTheyAre(List<TensorMeta> inputs) {
        if (inputs.size() != 1) {
            return false;
        }
        for (Placement p : inputs.getFirst().placements()) {
            if (p.isPartial()) {
                return false;
            }
        }
        return true;
    }
}
