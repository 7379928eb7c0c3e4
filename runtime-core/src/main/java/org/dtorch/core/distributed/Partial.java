package org.dtorch.core.distributed;

import java.util.Objects;
import org.dtorch.core.communication.ReduceOpType;

/**
 * {@code P(op)}: every device along the mesh dimension holds a full-size partial value; the tensor is
 * their reduction with {@code op}.
 *
 * <p>Thread-safe: immutable.
 *
 * @param op how the partial values combine
 */
public record Partial(ReduceOpType op) implements Placement {

    /** Validates the op. */
    public Partial {
        Objects.requireNonNull(op, "op");
    }

    @Override
    public String toString() {
        return "P(" + op.shortName() + ")";
    }
}
