package org.dtorch.ops.difftest;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;

/**
 * A redistribution: the value {@code reads[0]} moved to {@code placements} on mesh number {@code mesh} (its own mesh, or
 * another: a cross-mesh move). On one device it is a copy.
 *
 * <p>Immutable. Thread-safe.
 */
public record Move(int[] reads, int mesh, List<Placement> placements) implements Step {
    public Move {
        reads = reads.clone();
        placements = List.copyOf(placements);
    }

    @Override
    public int[] reads() {
        return reads.clone();
    }

    @Override
    public int outputs() {
        return 1;
    }

    @Override
    public Step withReads(int[] others) {
        return new Move(others, mesh, placements);
    }

    /** A move may keep its input's memory where nothing changes, so writes into either are not generated. */
    @Override
    public boolean aliases() {
        return true;
    }

    @Override
    public List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in) {
        return List.of(in.getFirst().redistribute(meshes.get(mesh), placements.toArray(Placement[]::new)));
    }

    @Override
    public List<Tensor> reference(List<Tensor> in) {
        return List.of(in.getFirst().clone());
    }

    @Override
    public String python(List<String> in, List<String> out, boolean distributed) {
        return out.getFirst() + " = " + in.getFirst() + (distributed ? ".redistribute(m" + mesh + ", " + Py.placements(placements) + ")" : ".clone()");
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Move m && Arrays.equals(reads, m.reads) && mesh == m.mesh && placements.equals(m.placements);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(reads) * 31 + placements.hashCode();
    }

    @Override
    public String toString() {
        return "redistribute " + Arrays.toString(reads) + " to m" + mesh + " " + placements;
    }
}
