package org.dtorch.core.distributed;

import java.util.Arrays;
import java.util.List;
import org.dtorch.core.device.DeviceKind;

/**
 * The degrees of a model's parallelism and the device mesh they span (TeleFuser's
 * {@code create_device_mesh_from_config}): data parallel, classifier-free guidance, sequence parallel in
 * two dimensions (ring, then Ulysses), pipeline and tensor parallel, in that order from outermost to innermost.
 *
 * <p>The mesh always has the six dimensions {@link #DIM_NAMES}, a degree of 1 included: code written for one
 * configuration finds every name in any other, so a model's code does not branch on which parallelisms are on, and a
 * size-1 dimension costs nothing.
 * Ranks are the mesh's device ids {@code 0..worldSize-1} in row-major order, so the tensor-parallel ranks are
 * neighbours and the data-parallel replicas are furthest apart.
 *
 * <p>The group accessors ({@link #cfgGroup(long)} and its siblings) give the ranks a rank shares a step
 * with, in coordinate order: the group's rank of a member is its index in the list. Callers never derive
 * rank lists themselves.
 *
 * <p>Thread-safe: immutable.
 *
 * @param dp      data-parallel degree, >= 1
 * @param cfg     classifier-free-guidance degree (conditional and unconditional branches), >= 1
 * @param ring    ring-attention degree, >= 1
 * @param ulysses Ulysses (head all-to-all) degree, >= 1
 * @param pp      pipeline-parallel degree, >= 1
 * @param tp      tensor-parallel degree, >= 1
 */
public record ParallelConfig(int dp, int cfg, int ring, int ulysses, int pp, int tp) {

    /** The mesh's dimension names, outermost first. */
    public static final List<String> DIM_NAMES = List.of("dp", "cfg", "ring", "ulysses", "pp", "tp");

    /** Checks every degree and their product. */
    public ParallelConfig {
        int[] degrees = {dp, cfg, ring, ulysses, pp, tp};
        long product = 1;
        for (int i = 0; i < degrees.length; i++) {
            if (degrees[i] < 1) {
                throw new IllegalArgumentException("ParallelConfig: " + DIM_NAMES.get(i) + " must be >= 1, got " + degrees[i]);
            }
            product *= degrees[i];
            if (product > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("ParallelConfig: the degrees " + Arrays.toString(degrees)
                    + " span more devices than a mesh can number");
            }
        }
    }

    /** The number of devices the configuration spans: the product of the degrees. */
    public int worldSize() {
        return dp * cfg * ring * ulysses * pp * tp;
    }

    /** The mesh shape, in the order of {@link #DIM_NAMES}. */
    public int[] meshShape() {
        return new int[] {dp, cfg, ring, ulysses, pp, tp};
    }

    /**
     * Checks that the configuration spans exactly {@code deviceCount} devices.
     *
     * @throws IllegalArgumentException naming each degree and the product when it differs
     */
    public void checkWorldSize(int deviceCount) {
        if (deviceCount != worldSize()) {
            throw new IllegalArgumentException(this + " spans dp * cfg * ring * ulysses * pp * tp = " + dp + " * " + cfg + " * " + ring
                + " * " + ulysses + " * " + pp + " * " + tp + " = " + worldSize() + " devices, but there are " + deviceCount);
        }
    }

    /** The mesh of devices {@code 0..worldSize-1} with the dimensions {@link #DIM_NAMES}. */
    public DeviceMesh deviceMesh(DeviceKind kind) {
        return DeviceMesh.initDeviceMesh(kind, meshShape(), DIM_NAMES);
    }

    /**
     * The mesh over {@code deviceCount} devices, checked first.
     *
     * @throws IllegalArgumentException when the product of the degrees is not {@code deviceCount}
     */
    public DeviceMesh deviceMesh(DeviceKind kind, int deviceCount) {
        checkWorldSize(deviceCount);
        return deviceMesh(kind);
    }

    /** The data-parallel replicas {@code rank} belongs to, one rank each. */
    public List<Long> dpGroup(long rank) {
        return group("dp", rank);
    }

    /** The classifier-free-guidance group of {@code rank}: the ranks computing its other guidance branches. */
    public List<Long> cfgGroup(long rank) {
        return group("cfg", rank);
    }

    /** The ring-attention group of {@code rank}: the ranks K and V rotate between. */
    public List<Long> ringGroup(long rank) {
        return group("ring", rank);
    }

    /** The Ulysses group of {@code rank}: the ranks its all-to-alls between sequence and heads span. */
    public List<Long> ulyssesGroup(long rank) {
        return group("ulysses", rank);
    }

    /** The whole sequence-parallel group of {@code rank}: its ring and Ulysses dimensions, ring-major. */
    public List<Long> spGroup(long rank) {
        return spMesh(rank).deviceIds();
    }

    /** The pipeline group of {@code rank}: one rank per stage, first stage first. */
    public List<Long> ppGroup(long rank) {
        return group("pp", rank);
    }

    /** The tensor-parallel group of {@code rank}. */
    public List<Long> tpGroup(long rank) {
        return group("tp", rank);
    }

    /** The two-dimensional {@code (ring, ulysses)} sub-mesh of {@code rank}, on CPU device ids. */
    public DeviceMesh spMesh(long rank) {
        return deviceMesh(DeviceKind.CPU).subMesh(checkRank(rank), "ring", "ulysses");
    }

    private List<Long> group(String name, long rank) {
        DeviceMesh mesh = deviceMesh(DeviceKind.CPU);
        return mesh.groupAlong(mesh.dimIndex(name), checkRank(rank));
    }

    private long checkRank(long rank) {
        if (rank < 0 || rank >= worldSize()) {
            throw new IllegalArgumentException(this + ": rank must be in [0, " + worldSize() + "), got " + rank);
        }
        return rank;
    }
}
