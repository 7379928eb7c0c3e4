package org.dtorch.core.distributed;

import java.util.List;
import java.util.Objects;

/**
 * Where a distributed tensor lives: a mesh and one placement per mesh dimension (DTensor's spec without
 * the tensor metadata).
 *
 * <p>Thread-safe: immutable.
 *
 * @param mesh       the device mesh
 * @param placements one placement per mesh dimension
 */
public record Sharding(DeviceMesh mesh, List<Placement> placements) {

    /** Validates that there is one placement per mesh dimension. */
    public Sharding {
        Objects.requireNonNull(mesh, "mesh");
        Objects.requireNonNull(placements, "placements");
        placements = List.copyOf(placements);
        if (placements.size() != mesh.ndim()) {
            throw new IllegalArgumentException("placements " + placements + " need one entry per dimension of " + mesh
                + " (" + mesh.ndim() + "), got " + placements.size());
        }
    }

    /** A sharding from placements given in mesh-dimension order. */
    public static Sharding of(DeviceMesh mesh, Placement... placements) {
        return new Sharding(mesh, List.of(placements));
    }

    /** A whole tensor on one device: a one-device mesh holding {@code [R]}. */
    public static Sharding wholeOn(org.dtorch.core.device.DeviceKind kind, long device) {
        return of(DeviceMesh.of(kind, device), Placement.replicate());
    }

    /** The placement on mesh dimension {@code meshDim}. */
    public Placement placement(int meshDim) {
        return placements.get(meshDim);
    }

    /** True when some mesh dimension holds partial values. */
    public boolean hasPartial() {
        for (Placement p : placements) {
            if (p.isPartial()) {
                return true;
            }
        }
        return false;
    }

    /** The same placements on the same devices of {@code kind} ({@link DeviceMesh#withKind}). */
    public Sharding withKind(org.dtorch.core.device.DeviceKind kind) {
        return kind == mesh.kind() ? this : new Sharding(mesh.withKind(kind), placements);
    }

    /** The same mesh with other placements. */
    public Sharding withPlacements(List<Placement> other) {
        return new Sharding(mesh, other);
    }

    /** Prints as {@code [S(0), R] on DeviceMesh(cpu, [[0, 1], [2, 3]])}. */
    @Override
    public String toString() {
        return placements + " on " + mesh;
    }
}
