package org.dtorch.core.distributed;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * How to move a tensor from one sharding to another: steps on the source mesh, then (between different
 * meshes) a {@link CrossMeshTransfer}, then steps on the target mesh. A plan is a value: the planner
 * caches it, and every device executes the same plan.
 *
 * <p><b>Between device kinds</b> (a CPU mesh and a CUDA mesh of one runtime on CUDA) the plan
 * holds {@link #throughDevice()}: the plan between the two meshes' CUDA twins (same ids and placements), which
 * does all the communication. The executor moves the input from the host to its worker's GPU first, or the
 * output from the GPU to the host last; {@link #sourceSteps()}, {@link #transfer()} and {@link #targetSteps()}
 * are those of the twin plan.
 *
 * <p>Thread-safe: immutable.
 */
public final class RedistributionPlan {
    private final Sharding source;
    private final Sharding target;
    private final long[] globalShape;
    private final List<RedistributionStep> sourceSteps;
    private final CrossMeshTransfer transfer;
    private final List<RedistributionStep> targetSteps;
    private final RedistributionPlan throughDevice;

    RedistributionPlan(Sharding source, Sharding target, long[] globalShape, List<RedistributionStep> sourceSteps,
                       CrossMeshTransfer transfer, List<RedistributionStep> targetSteps) {
        this.source = source;
        this.target = target;
        this.globalShape = globalShape.clone();
        this.sourceSteps = List.copyOf(sourceSteps);
        this.transfer = transfer;
        this.targetSteps = List.copyOf(targetSteps);
        this.throughDevice = null;
    }

    /** A move between device kinds, carried out by {@code throughDevice} between the CUDA twins. */
    RedistributionPlan(Sharding source, Sharding target, long[] globalShape, RedistributionPlan throughDevice) {
        this.source = source;
        this.target = target;
        this.globalShape = globalShape.clone();
        this.sourceSteps = throughDevice.sourceSteps;
        this.transfer = throughDevice.transfer;
        this.targetSteps = throughDevice.targetSteps;
        this.throughDevice = throughDevice;
    }

    /**
     * For a move between a CPU mesh and a CUDA mesh: the plan between their CUDA twins that the executor runs
     * after moving the input to the GPU or before moving the output to the host; empty between meshes of one kind.
     */
    public Optional<RedistributionPlan> throughDevice() {
        return Optional.ofNullable(throughDevice);
    }

    /** Where the tensor is. */
    public Sharding source() {
        return source;
    }

    /** Where it goes. */
    public Sharding target() {
        return target;
    }

    /** Its global shape. */
    public long[] globalShape() {
        return globalShape.clone();
    }

    /** Steps on the source mesh (all of them when the meshes are the same). */
    public List<RedistributionStep> sourceSteps() {
        return sourceSteps;
    }

    /** The move between meshes, if the meshes differ. */
    public Optional<CrossMeshTransfer> transfer() {
        return Optional.ofNullable(transfer);
    }

    /** Steps on the target mesh after the transfer. */
    public List<RedistributionStep> targetSteps() {
        return targetSteps;
    }

    /** Every step, in order (the transfer sits between the two lists). */
    public List<RedistributionStep> allSteps() {
        List<RedistributionStep> all = new ArrayList<>(sourceSteps);
        all.addAll(targetSteps);
        return all;
    }

    /** True when nothing changes (a move between device kinds always changes where the values are). */
    public boolean isIdentity() {
        return throughDevice == null && sourceSteps.isEmpty() && transfer == null && targetSteps.isEmpty();
    }

    @Override
    public String toString() {
        if (throughDevice != null) {
            return "RedistributionPlan{" + source + " -> " + target + " through " + throughDevice + "}";
        }
        return "RedistributionPlan{" + source.placements() + " -> " + target.placements() + ": " + sourceSteps
            + (transfer == null ? "" : ", " + transfer + ", " + targetSteps) + "}";
    }
}
