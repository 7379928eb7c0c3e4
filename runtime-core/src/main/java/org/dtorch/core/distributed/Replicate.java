package org.dtorch.core.distributed;

/**
 * {@code R}: every device along the mesh dimension holds the same values.
 *
 * <p>Thread-safe: immutable.
 */
public record Replicate() implements Placement {
    static final Replicate INSTANCE = new Replicate();

    @Override
    public String toString() {
        return "R";
    }
}
