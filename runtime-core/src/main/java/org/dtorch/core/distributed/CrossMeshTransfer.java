package org.dtorch.core.distributed;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Moves a tensor between two meshes with different devices (DTorch's {@code ConvertDeviceMesh},
 * generalized to meshes of any shape and size): every target device receives, from one source device per
 * part of the tensor, the intersection of that source's slice with its own.
 *
 * <p>Neither layout may hold partial values (the planner reduces them first and re-creates them after).
 * Where a part is replicated on the source mesh, the target device takes it from itself if it holds a
 * replica, else from the replica chosen by its position, so the load spreads over the replicas.
 *
 * <p>A target device whose slice is empty (a zero-size shard) receives one empty piece, from the holder of the
 * first source slice chosen as above: the piece carries no element, but it gives the device the dtype and device of
 * the tensor it allocates, as every other target device learns them from its pieces.
 *
 * <p>Thread-safe: immutable.
 */
public final class CrossMeshTransfer {
    private final ShardLayout source;
    private final ShardLayout target;
    private final List<Piece> pieces;
    private final List<Long> participants;

    /**
     * One box of the tensor that moves from {@code sourceDevice} to {@code targetDevice}: {@code shape}
     * elements at {@code sourceOffsets} in the source's local tensor and {@code targetOffsets} in the
     * target's.
     *
     * @param sourceDevice  the device that has the box
     * @param targetDevice  the device that needs it
     * @param sourceOffsets where the box starts in the source's local tensor
     * @param targetOffsets where the box starts in the target's local tensor
     * @param shape         the box's shape
     */
    public record Piece(long sourceDevice, long targetDevice, long[] sourceOffsets, long[] targetOffsets, long[] shape) {

        /** The store key of the piece: {@code 3>5}. */
        public String key() {
            return sourceDevice + ">" + targetDevice;
        }
    }

    CrossMeshTransfer(ShardLayout source, ShardLayout target) {
        this.source = source;
        this.target = target;
        this.pieces = List.copyOf(computePieces(source, target));
        TreeSet<Long> all = new TreeSet<>(source.sharding().mesh().deviceIds());
        all.addAll(target.sharding().mesh().deviceIds());
        this.participants = List.copyOf(all);
    }

    /** The source layout (no partial values). */
    public ShardLayout source() {
        return source;
    }

    /** The target layout (no partial values). */
    public ShardLayout target() {
        return target;
    }

    /** Every piece, in a deterministic order. */
    public List<Piece> pieces() {
        return pieces;
    }

    /** Every device of either mesh, sorted: the participants of the transfer's store. */
    public List<Long> participants() {
        return participants;
    }

    /** The pieces {@code deviceId} sends. */
    public List<Piece> piecesFrom(long deviceId) {
        return pieces.stream().filter(p -> p.sourceDevice() == deviceId).toList();
    }

    /** The pieces {@code deviceId} receives. */
    public List<Piece> piecesTo(long deviceId) {
        return pieces.stream().filter(p -> p.targetDevice() == deviceId).toList();
    }

    private static List<Piece> computePieces(ShardLayout source, ShardLayout target) {
        DeviceMesh sourceMesh = source.sharding().mesh();
        // Group the source devices that hold the same slice (they differ only on replicated mesh dims).
        Map<String, List<Long>> replicas = new LinkedHashMap<>();
        for (long device : sourceMesh.deviceIds()) {
            String slice = java.util.Arrays.toString(source.offsets(device)) + java.util.Arrays.toString(source.localShape(device));
            replicas.computeIfAbsent(slice, k -> new ArrayList<>()).add(device);
        }
        List<Long> targetDevices = target.sharding().mesh().deviceIds();
        List<Piece> result = new ArrayList<>();
        for (int t = 0; t < targetDevices.size(); t++) {
            long targetDevice = targetDevices.get(t);
            long[] tOff = target.offsets(targetDevice);
            long[] tShape = target.localShape(targetDevice);
            if (target.localNumel(targetDevice) == 0) {
                List<Long> holders = replicas.values().iterator().next();
                long sourceDevice = holders.contains(targetDevice) ? targetDevice : holders.get(t % holders.size());
                long[] none = new long[tShape.length];
                result.add(new Piece(sourceDevice, targetDevice, none, none.clone(), none.clone()));
                continue;
            }
            for (List<Long> holders : replicas.values()) {
                long sourceDevice = holders.contains(targetDevice) ? targetDevice : holders.get(t % holders.size());
                long[] sOff = source.offsets(sourceDevice);
                long[] sShape = source.localShape(sourceDevice);
                int dims = tOff.length;
                long[] shape = new long[dims];
                long[] inSource = new long[dims];
                long[] inTarget = new long[dims];
                boolean empty = false;
                for (int d = 0; d < dims && !empty; d++) {
                    long lo = Math.max(tOff[d], sOff[d]);
                    long hi = Math.min(tOff[d] + tShape[d], sOff[d] + sShape[d]);
                    empty = hi <= lo;
                    shape[d] = Math.max(0, hi - lo);
                    inSource[d] = lo - sOff[d];
                    inTarget[d] = lo - tOff[d];
                }
                if (!empty) {
                    result.add(new Piece(sourceDevice, targetDevice, inSource, inTarget, shape));
                }
            }
        }
        return result;
    }

    @Override
    public String toString() {
        return "CrossMeshTransfer{" + pieces.size() + " pieces, " + source.sharding() + " -> " + target.sharding() + "}";
    }
}
