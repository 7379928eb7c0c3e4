package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.BinarySpec;
import org.dtorch.ops.CastSpec;
import org.dtorch.ops.RedistributeSpec;
import org.dtorch.ops.ReduceSpec;
import org.dtorch.ops.ScalarSpec;
import org.dtorch.ops.UnarySpec;

/**
 * The derivative of a recorded operator, by its spec: the element-wise, scalar, reduction, cast and redistribution
 * operators here, ATen operators by name in {@link AtenDerivatives}.
 *
 * <p>A redistribution's derivative is its dual: the gradient moves back to the input's mesh and placements, with a
 * partial input's gradient whole ({@code R}), since every partial value contributes to the sum with weight one. So
 * {@code S -> R} reverses as a local slice, {@code R -> S} as an all-gather, {@code P -> R} as nothing at all, a partial
 * gradient of {@code R -> P} as an all-reduce, and a move across meshes as the move back.
 *
 * <p>Thread-safe: stateless.
 */
public final class Derivatives {
    private Derivatives() {
    }

    /** The derivative of {@code spec} on {@code inputs}, or null when it has none (backward then names the operator). */
    public static Derivative of(OpSpec spec, DTensor[] inputs, List<DTensor> outputs) {
        return switch (spec) {
            case BinarySpec b -> binary(b.kind());
            case ScalarSpec s -> scalar(s.kind(), s.scalar());
            case UnarySpec u -> unary(u.kind());
            case ReduceSpec r -> reduce(r);
            case CastSpec c -> (in, out, g, needs) -> new DTensor[] {g[0].dtype() == in[0].dtype() ? g[0] : g[0].to(in[0].dtype())};
            case RedistributeSpec r -> (in, out, g, needs) -> new DTensor[] {dual(g[0], in[0])};
            case AtenSpec a -> AtenDerivatives.of(a.call(), inputs);
            default -> null;
        };
    }

    /**
     * The forward of {@code spec} on {@code inputs} issued to keep what its derivative needs beyond the inputs and
     * outputs, for an operator about to be recorded; null where the plain operator serves (the caller issues it):
     * {@code scaled_dot_product_attention}, whose devices keep libtorch's graph of the call so that its backward does not
     * run the forward again, and {@code rms_norm}, which keeps its {@code rstd}.
     */
    public static SavedForward savingForward(OpSpec spec, DTensor[] inputs) {
        if (!(spec instanceof AtenSpec a) || inputs == null || inputs.length == 0) {
            return null;
        }
        return switch (a.call().overload().name()) {
            case "scaled_dot_product_attention" -> Attention.saving(a.call(), inputs);
            case "rms_norm" -> AtenDerivatives.savingRmsNorm(a.call(), inputs);
            default -> null;
        };
    }

    /** {@code g} moved to {@code input}'s mesh and placements, a partial placement as {@code R}. */
    static DTensor dual(DTensor g, DTensor input) {
        List<Placement> placements = input.placements();
        Placement[] target = new Placement[placements.size()];
        for (int i = 0; i < target.length; i++) {
            target[i] = placements.get(i).isPartial() ? Placement.replicate() : placements.get(i);
        }
        if (g.mesh().equals(input.mesh()) && g.placements().equals(List.of(target))) {
            return g;
        }
        return g.redistribute(input.mesh(), target);
    }

    private static Derivative binary(BinarySpec.Kind kind) {
        return (in, out, g, needs) -> {
            DTensor a = in[0];
            DTensor b = in[1];
            DTensor gy = g[0];
            return switch (kind) {
                case ADD -> new DTensor[] {needs[0] ? Grads.sumTo(gy, a.shape()) : null, needs[1] ? Grads.sumTo(gy, b.shape()) : null};
                case SUB -> new DTensor[] {needs[0] ? Grads.sumTo(gy, a.shape()) : null, needs[1] ? Grads.sumTo(gy.neg(), b.shape()) : null};
                case MUL -> new DTensor[] {needs[0] ? Grads.sumTo(gy.mul(b), a.shape()) : null,
                    needs[1] ? Grads.sumTo(gy.mul(a), b.shape()) : null};
                case DIV -> new DTensor[] {needs[0] ? Grads.sumTo(gy.div(b), a.shape()) : null,
                    needs[1] ? Grads.sumTo(gy.mul(out[0]).div(b).neg(), b.shape()) : null};
            };
        };
    }

    private static Derivative scalar(ScalarSpec.Kind kind, double s) {
        return (in, out, g, needs) -> {
            DTensor gx = switch (kind) {
                case ADD, SUB -> g[0];
                case RSUB -> g[0].neg();
                case MUL -> g[0].mul(s);
                case DIV -> g[0].div(s);
                case RDIV -> g[0].mul(out[0]).div(in[0]).neg();
            };
            return new DTensor[] {gx};
        };
    }

    private static Derivative unary(UnarySpec.Kind kind) {
        return (in, out, g, needs) -> {
            DTensor gx = switch (kind) {
                case NEG -> g[0].neg();
                case RELU -> aten("threshold_backward", "T,T,i", v(null, null, 0L), g[0], out[0]);
                case SILU -> aten("silu_backward", "T,T", v(null, null), g[0], in[0]);
                case GELU -> aten("gelu_backward", "T,T", v(null, null), g[0], in[0]);
                case EXP -> g[0].mul(out[0]);
                case TANH -> aten("tanh_backward", "T,T", v(null, null), g[0], out[0]);
                case SIGMOID -> aten("sigmoid_backward", "T,T", v(null, null), g[0], out[0]);
            };
            return new DTensor[] {gx};
        };
    }

    private static Derivative reduce(ReduceSpec r) {
        if (r.kind() == ReduceSpec.Kind.MAX) {
            return SelectionDerivatives.extremum(java.util.Arrays.stream(r.dims()).asLongStream().toArray(), r.keepdim());
        }
        boolean mean = r.kind() == ReduceSpec.Kind.MEAN;
        return (in, out, g, needs) -> {
            long[] shape = in[0].shape();
            int[] dims = Grads.normalize(r.dims(), shape.length);
            DTensor gx = Grads.unreduce(g[0], shape, dims, r.keepdim());
            return new DTensor[] {mean ? gx.div((double) Grads.count(shape, dims)) : gx};
        };
    }
}
