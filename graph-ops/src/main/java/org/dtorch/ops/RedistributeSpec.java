package org.dtorch.ops;

import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.ChannelTransferKernel;
import org.dtorch.core.kernel.ConvertKernel;

/**
 * {@code redistribute(mesh, placements)}: the explicit move to another sharding, on the same mesh or onto
 * another, run by {@link ConvertKernel} with a plan from the {@link RedistributionPlanner} (checked when
 * the operator is created, so a bad request fails in the client's thread). Onto the destination of a declared
 * channel ({@code DTorch.channel}) it runs {@link ChannelTransferKernel} through that channel instead.
 *
 * <p>Thread-safe: immutable but for the plan and the kernel it keeps for its input, which every device may read.
 */
public final class RedistributeSpec implements OpSpec {
    private final Sharding target;
    /** The declared channel the move goes through, or null for the ordinary path. */
    private final ChannelOptions channel;
    /** The operator an implicit move prepares the input of, or null for a move the program asked for. */
    private final String implicitFor;
    /** The plan of the last input asked about: inference, the graph history and the identity test all ask. */
    private final LastResult<RedistributionPlan> lastPlan = new LastResult<>();
    /** The kernel of the last input a device asked for, built once for every device of an operator. */
    private final LastResult<ConvertKernel> lastKernel = new LastResult<>();

    /** A move to {@code target}. */
    public RedistributeSpec(Sharding target) {
        this(target, null);
    }

    /** A move to {@code target} through {@code channel} (a declared edge from the input's mesh), or the ordinary path if null. */
    public RedistributeSpec(Sharding target, ChannelOptions channel) {
        this(target, channel, null);
    }

    private RedistributeSpec(Sharding target, ChannelOptions channel, String implicitFor) {
        this.target = Objects.requireNonNull(target, "target");
        this.channel = channel;
        this.implicitFor = implicitFor;
    }

    /**
     * The move to {@code target} that the runtime inserts because operator {@code operator} cannot take its input's
     * placements: named {@code redistribute (implicit, for <operator>)} in traces, the profiler and graph dumps.
     */
    public static RedistributeSpec implicit(Sharding target, String operator) {
        return new RedistributeSpec(target, null, Objects.requireNonNull(operator, "operator"));
    }

    @Override
    public String name() {
        return implicitName("redistribute", implicitFor);
    }

    /** {@code base}, or for an implicit move {@code base (implicit, for operator)}. */
    static String implicitName(String base, String implicitFor) {
        return implicitFor == null ? base : base + " (implicit, for " + implicitFor + ")";
    }

    /** The operator an implicit move prepares an input for, or null for an explicit one. */
    public String implicitFor() {
        return implicitFor;
    }

    @Override
    public boolean communicates() {
        return true;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        plan(t);
        if (channel != null) {
            ChannelTransferKernel.checkMeshes(t.sharding().mesh(), target.mesh(), channel);
        }
        return List.of(t.withSharding(target));
    }

    /**
     * Between a CPU and a CUDA mesh (or onto the same CPU sharding) in a runtime on CUDA; a move between two CPU
     * meshes there would need CPU collectives or host values in the stores, which such a runtime does not run.
     */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return HostMeshes.movesBetweenKindsOrStays(op.inputs().getFirst().meta().sharding(), target);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta input = op.inputs().getFirst().meta();
        if (channel != null) {
            ChannelTransferKernel move = ChannelTransferKernel.of(input.sharding(), target, input.shape(), channel);
            return (ctx, inputs) -> Collections.singletonList(move.run(ctx, inputs.getFirst()));
        }
        ConvertKernel move = lastKernel.of(List.of(input), inputs -> new ConvertKernel(plan(input)));
        return (ctx, inputs) -> Collections.singletonList(move.run(ctx, inputs.getFirst()));
    }

    @Override
    public List<RedistributionPlan> redistributions(Operator op) {
        return List.of(plan(op.inputs().getFirst().meta()));
    }

    /**
     * The plan that moves {@code input} to the target (kept for the next question about the same input).
     *
     * @throws IllegalArgumentException if the move is invalid or unsupported
     */
    public RedistributionPlan plan(TensorMeta input) {
        return lastPlan.of(List.of(input), inputs -> RedistributionPlanner.plan(input.sharding(), target, input.shape()));
    }

    public Sharding target() {
        return target;
    }

    /** The channel the move goes through, or null. */
    ChannelOptions channel() {
        return channel;
    }
}
