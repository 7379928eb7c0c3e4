package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.graph.TensorMeta;

/**
 * An operator that can run on more than one combination of input placements and chooses among them
 * ({@link OptionSearch}: the one whose input moves cost least, the inputs' own where they fit one). The runtime's
 * client ({@link org.dtorch.api.DTorch}) redistributes the inputs to the choice before it adds the operator, unless
 * implicit redistribution is off, in which case the operator's own {@code inferOutputs} refuses inputs that do not fit.
 *
 * <p>Implementations are immutable. Thread-safe.
 */
public interface PlacementChoice {

    /**
     * The placements the inputs should have, and the outputs then get, for these inputs.
     *
     * @throws IllegalArgumentException when the shapes, dtypes or parameters do not fit the operator at all
     */
    ShardingStrategy.Decision choose(List<TensorMeta> inputs);

    /**
     * True when the inputs certainly fit as they are, told without searching (a shortcut for the operators issued most
     * often; false means "ask {@link #choose}"). The default knows nothing.
     */
    default boolean fitsAsTheyAre(List<TensorMeta> inputs) {
        return false;
    }

    /**
     * True when the choice is the fallback for operators without a sharding rule (every input replicated): the first
     * such run of an operator warns, naming what it moved.
     */
    default boolean isFallback() {
        return false;
    }
}
