package org.dtorch.core.distributed;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * How to move a tensor from one sharding to another: steps on the source mesh, then (between different
 * meshes) a {@link CrossMeshTransfer}, then steps on the target mesh. A plan is a value: the planner
 * caches it, and every device executes the same plan.
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

    RedistributionPlan(Sharding source, Sharding target, long[] globalShape, List<RedistributionStep> sourceSteps,
                       CrossMeshTransfer transfer, List<RedistributionStep> targetSteps) {
        this.source = source;
        this.target = target;
        this.globalShape = globalShape.clone();
        this.sourceSteps = List.copyOf(sourceSteps);
        this.transfer = transfer;
        this.targetSteps = List.copyOf(targetSteps);
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

    /** True when nothing changes. */
    public boolean isIdentity() {
        return sourceSteps.isEmpty() && transfer == null && targetSteps.isEmpty();
    }

    @Override
    public String toString() {
        return "RedistributionPlan{" + source.placements() + " -> " + target.placements() + ": " + sourceSteps
            + (transfer == null ? "" : ", " + transfer + ", " + targetSteps) + "}";
    }
}
