package org.dtorch.core.distributed;

/**
 * {@code S(dim)}: tensor dimension {@code dim} is split over the mesh dimension with the balanced split.
 *
 * <p>Thread-safe: immutable.
 *
 * @param dim the tensor dimension, zero or more
 */
public record Shard(int dim) implements Placement {

    /** Validates the dimension. */
    public Shard {
        if (dim < 0) {
            throw new IllegalArgumentException("Shard dim must be >= 0, got " + dim);
        }
    }

    @Override
    public String toString() {
        return "S(" + dim + ")";
    }
}
