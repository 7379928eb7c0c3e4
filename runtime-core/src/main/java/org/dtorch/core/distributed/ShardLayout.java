package org.dtorch.core.distributed;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.BalancedSplit;

/**
 * Which slice of a global tensor every device of a mesh holds under a {@link Sharding}.
 *
 * <p>Mesh dimensions apply in order: for each mesh dimension {@code i} with {@code S(d)}, the slice of
 * dimension {@code d} held so far is split with {@link BalancedSplit} over the devices along {@code i}
 * and the device keeps its coordinate's part. A tensor dimension sharded over several mesh dimensions is
 * so split first by the outer (lower) mesh dimension, then each part by the next. {@code R} and
 * {@code P} leave the shape alone: a partial value is full-size.
 *
 * <p>A dimension shorter than the devices that split it leaves some devices a zero-size shard (2 rows over 4 devices
 * are {@code 1, 1, 0, 0}), as PyTorch's DTensor does: an empty shard is an ordinary local tensor whose offset is where
 * the elements before it end.
 *
 * <p>Thread-safe: immutable.
 */
public final class ShardLayout {
    private final long[] globalShape;
    private final Sharding sharding;
    private final long[][] localShapes;
    private final long[][] offsets;

    private ShardLayout(long[] globalShape, Sharding sharding) {
        this.globalShape = globalShape.clone();
        this.sharding = sharding;
        DeviceMesh mesh = sharding.mesh();
        this.localShapes = new long[mesh.count()][];
        this.offsets = new long[mesh.count()][];
        List<Long> ids = mesh.deviceIds();
        for (int i = 0; i < ids.size(); i++) {
            long[][] slice = slice(globalShape, sharding, mesh.coordinates(ids.get(i)));
            localShapes[i] = slice[0];
            offsets[i] = slice[1];
        }
    }

    /**
     * The layout of a tensor of {@code globalShape} under {@code sharding}.
     *
     * @throws IllegalArgumentException if a shard dimension is out of range or a dimension is negative
     */
    public static ShardLayout of(long[] globalShape, Sharding sharding) {
        Objects.requireNonNull(globalShape, "globalShape");
        Objects.requireNonNull(sharding, "sharding");
        String problem = problem(globalShape, sharding);
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        return new ShardLayout(globalShape, sharding);
    }

    /** Why {@code sharding} cannot hold a tensor of {@code globalShape}, or null if it can. */
    public static String problem(long[] globalShape, Sharding sharding) {
        for (long s : globalShape) {
            if (s < 0) {
                return "shape " + Arrays.toString(globalShape) + " has a negative dimension";
            }
        }
        DeviceMesh mesh = sharding.mesh();
        for (int i = 0; i < mesh.ndim(); i++) {
            if (sharding.placement(i) instanceof Shard s && s.dim() >= globalShape.length) {
                return "placement " + s + " on mesh dimension " + i + " is out of range for a tensor of shape "
                    + Arrays.toString(globalShape) + " (placements " + sharding.placements() + ")";
            }
        }
        return null;
    }

    /** The shape of the slice held at {@code coords}, and its offsets in the global tensor. */
    private static long[][] slice(long[] globalShape, Sharding sharding, int[] coords) {
        long[] shape = globalShape.clone();
        long[] offset = new long[globalShape.length];
        DeviceMesh mesh = sharding.mesh();
        for (int i = 0; i < mesh.ndim(); i++) {
            if (sharding.placement(i) instanceof Shard s) {
                int parts = mesh.size(i);
                offset[s.dim()] += BalancedSplit.offset(shape[s.dim()], parts, coords[i]);
                shape[s.dim()] = BalancedSplit.size(shape[s.dim()], parts, coords[i]);
            }
        }
        return new long[][] {shape, offset};
    }

    /** The global shape. */
    public long[] globalShape() {
        return globalShape.clone();
    }

    /** The sharding. */
    public Sharding sharding() {
        return sharding;
    }

    /** The shape of the slice {@code deviceId} holds. */
    public long[] localShape(long deviceId) {
        return localShapes[index(deviceId)].clone();
    }

    /**
     * True when {@code t} has the shape of the slice {@code deviceId} holds: what a worker checks of every output it
     * stores, without copying the expected shape or the tensor's.
     */
    public boolean isLocalShapeOf(long deviceId, Tensor t) {
        long[] expected = localShapes[index(deviceId)];
        if (t.dim() != expected.length) {
            return false;
        }
        for (int d = 0; d < expected.length; d++) {
            if (t.size(d) != expected[d]) {
                return false;
            }
        }
        return true;
    }

    /** Where the slice of {@code deviceId} starts in the global tensor, per dimension. */
    public long[] offsets(long deviceId) {
        return offsets[index(deviceId)].clone();
    }

    /** The number of elements {@code deviceId} holds. */
    public long localNumel(long deviceId) {
        long n = 1;
        for (long s : localShapes[index(deviceId)]) {
            n *= s;
        }
        return n;
    }

    /** A view of the slice of {@code full} (a tensor of the global shape) that {@code deviceId} holds. The caller closes it. */
    public Tensor localSlice(Tensor full, long deviceId) {
        return narrow(full, offsets(deviceId), localShape(deviceId));
    }

    /** A view of {@code t} narrowed to {@code offsets} and {@code shape} on every dimension. The caller closes it. */
    public static Tensor narrow(Tensor t, long[] offsets, long[] shape) {
        if (shape.length == 0) {
            return new Tensor(t);
        }
        Tensor view = t.narrow(0, offsets[0], shape[0]);
        for (int d = 1; d < shape.length; d++) {
            Tensor next = view.narrow(d, offsets[d], shape[d]);
            view.close();
            view = next;
        }
        return view;
    }

    private int index(long deviceId) {
        int index = sharding.mesh().indexOf(deviceId);
        if (index < 0) {
            throw new IllegalArgumentException("device " + deviceId + " is not in " + sharding.mesh());
        }
        return index;
    }

    @Override
    public String toString() {
        return "ShardLayout{" + Arrays.toString(globalShape) + ", " + sharding + "}";
    }
}
