package org.dtorch.ops;

import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * A tensor and a scalar: {@code t + s}, {@code t - s}, {@code t * s}, {@code t / s}, {@code s - t},
 * {@code s / t}. A floating scalar turns an integral tensor into float32, as in torch.
 *
 * <p>Sharding rule: placements pass through; {@code P(sum)} only for {@code t * s} and {@code t / s}
 * (adding a scalar to every partial value would add it once per holder).
 *
 * <p>Thread-safe: immutable.
 */
public final class ScalarSpec implements OpSpec {
    /** The operations; {@code RSUB} is {@code s - t}, {@code RDIV} is {@code s / t}. */
    public enum Kind { ADD, SUB, MUL, DIV, RSUB, RDIV }

    private final Kind kind;
    private final double value;
    private final boolean floating;

    /** {@code kind} with a floating scalar. */
    public ScalarSpec(Kind kind, double value) {
        this(kind, value, true);
    }

    /** {@code kind} with an integral scalar. */
    public ScalarSpec(Kind kind, long value) {
        this(kind, value, false);
    }

    private ScalarSpec(Kind kind, double value, boolean floating) {
        this.kind = kind;
        this.value = value;
        this.floating = floating;
    }

    @Override
    public String name() {
        return switch (kind) {
            case ADD -> "add";
            case SUB -> "sub";
            case MUL -> "mul";
            case DIV -> "div";
            case RSUB -> "rsub";
            case RDIV -> "rdiv";
        };
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        boolean linear = kind == Kind.MUL || kind == Kind.DIV;
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placements().get(m);
            if (p.isPartial() && !(linear && Rules.isPartialSum(p))) {
                throw Rules.reject(name() + " with a scalar", inputs, m, "a scalar does not distribute over partial " + p,
                    "S or R; P(sum) only when multiplying or dividing by the scalar");
            }
        }
        ScalarType dtype = Rules.withScalar(t.dtype(), floating);
        if ((kind == Kind.DIV || kind == Kind.RDIV) && !Rules.isFloating(dtype)) {
            dtype = ScalarType.Float;
        }
        return List.of(new TensorMeta(t.shape(), dtype, t.sharding()));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new LocalKernel(in -> {
            Tensor t = in.getFirst();
            try (Scalar s = floating ? new Scalar(value) : new Scalar((long) value)) {
                return switch (kind) {
                    case ADD -> t.add(s);
                    case SUB -> t.sub(s);
                    case MUL -> t.mul(s);
                    case DIV -> t.div(s);
                    case RSUB -> {
                        try (Tensor negated = t.neg()) {
                            yield negated.add(s);
                        }
                    }
                    case RDIV -> {
                        try (Tensor asFloat = Rules.isFloating(t.scalar_type().intern()) ? new Tensor(t) : t.to(ScalarType.Float);
                             Tensor reciprocal = asFloat.reciprocal()) {
                            yield reciprocal.mul(s);
                        }
                    }
                };
            }
        });
    }

    Kind kind() {
        return kind;
    }

    double value() {
        return value;
    }

    boolean floating() {
        return floating;
    }

    static ScalarSpec restore(Kind kind, double value, boolean floating) {
        return new ScalarSpec(kind, value, floating);
    }
}
