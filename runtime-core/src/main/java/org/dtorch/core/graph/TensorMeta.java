package org.dtorch.core.graph;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;

/**
 * What is known of a global tensor before it exists: shape, dtype and sharding. Metadata inference works
 * on these alone.
 *
 * <p>Thread-safe: immutable (the shape array is copied in and out).
 */
public final class TensorMeta {
    private final long[] shape;
    private final ScalarType dtype;
    private final Sharding sharding;
    private volatile ShardLayout layout;
    private int hash;

    /**
     * Validates that the sharding can hold the shape.
     *
     * @throws IllegalArgumentException if a shard dimension is out of range or a dimension is negative
     */
    public TensorMeta(long[] shape, ScalarType dtype, Sharding sharding) {
        this.shape = Objects.requireNonNull(shape, "shape").clone();
        this.dtype = TorchTensors.canonical(Objects.requireNonNull(dtype, "dtype"));
        this.sharding = Objects.requireNonNull(sharding, "sharding");
        String problem = ShardLayout.problem(this.shape, sharding);
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
    }

    /** The global shape. */
    public long[] shape() {
        return shape.clone();
    }

    /** The size of dimension {@code d}. */
    public long size(int d) {
        return shape[d];
    }

    /** The number of dimensions. */
    public int ndim() {
        return shape.length;
    }

    /** The number of elements of the global tensor. */
    public long numel() {
        long n = 1;
        for (long s : shape) {
            n *= s;
        }
        return n;
    }

    /** The element type. */
    public ScalarType dtype() {
        return dtype;
    }

    /** The mesh and placements. */
    public Sharding sharding() {
        return sharding;
    }

    /** The placements, one per mesh dimension. */
    public List<Placement> placements() {
        return sharding.placements();
    }

    /** The placement on mesh dimension {@code meshDim}. */
    public Placement placement(int meshDim) {
        return sharding.placement(meshDim);
    }

    /** Which slice every device holds (computed once). */
    public ShardLayout layout() {
        ShardLayout l = layout;
        if (l == null) {
            l = ShardLayout.of(shape, sharding);
            layout = l;
        }
        return l;
    }

    /** A copy with another sharding. */
    public TensorMeta withSharding(Sharding other) {
        return new TensorMeta(shape, dtype, other);
    }

    /** {@code float32[4, 8] [S(0)] on DeviceMesh(cpu, [0, 1])}. */
    @Override
    public String toString() {
        return TorchTensors.dtypeName(dtype) + Arrays.toString(shape) + " " + sharding;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorMeta m && Arrays.equals(m.shape, shape) && m.dtype == dtype && m.sharding.equals(sharding);
    }

    @Override
    public int hashCode() {
        // Computed once: the fields never change, and the client hashes the same metadata for every operator it adds
        // (the keys of the decisions and inferences already made). A race computes the same value twice.
        int h = hash;
        if (h == 0) {
            h = Objects.hash(Arrays.hashCode(shape), dtype, sharding);
            hash = h;
        }
        return h;
    }
}
