package org.dtorch.core.graph;

import java.util.List;
import java.util.stream.Collectors;

/**
 * An operator cannot take its inputs' placements. The message names the operator, every input's
 * placements and the combinations it accepts, in the manner of DTorch's user guide. No redistribution is
 * inserted silently: redistribute an input and call again.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class ShardingException extends IllegalArgumentException {

    /** An exception for {@code op} whose inputs' metadata is {@code inputs}. */
    public ShardingException(String op, List<TensorMeta> inputs, String reason, String legal) {
        super(op + ": cannot take inputs with placements " + describe(inputs) + ": " + reason + ". Legal: " + legal
            + ". Redistribute an input first (no redistribution is inserted implicitly).");
    }

    private static String describe(List<TensorMeta> inputs) {
        return inputs.stream().map(m -> m.placements().toString()).collect(Collectors.joining(" and "));
    }
}
