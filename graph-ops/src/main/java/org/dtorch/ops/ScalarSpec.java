package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
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
 * {@code s / t}. The result dtype follows torch's promotion for a tensor and a Python-style scalar: the
 * scalar decides only when its category (bool, integral, floating) is higher than the tensor's, giving int64
 * or float32; true division of an integral result gives float32. Integral scalars stay exact 64-bit integers,
 * and a scalar the result dtype cannot hold is refused here, as torch refuses it.
 *
 * <p>Sharding rule: placements pass through; {@code P(sum)} only for {@code t * s} and {@code t / s}
 * (adding a scalar to every partial value would add it once per holder).
 *
 * <p>Thread-safe: immutable.
 */
public final class ScalarSpec implements OpSpec, ShardsPassThrough {
    /** The operations; {@code RSUB} is {@code s - t}, {@code RDIV} is {@code s / t}. */
    public enum Kind { ADD, SUB, MUL, DIV, RSUB, RDIV }

    private final Kind kind;
    private final ScalarValue value;

    /** {@code kind} with a floating scalar. */
    public ScalarSpec(Kind kind, double value) {
        this(kind, ScalarValue.ofDouble(value));
    }

    /** {@code kind} with an integral scalar, kept exact. */
    public ScalarSpec(Kind kind, long value) {
        this(kind, ScalarValue.ofLong(value));
    }

    /** {@code kind} with a bool scalar (a Python {@code True} or {@code False}). */
    public ScalarSpec(Kind kind, boolean value) {
        this(kind, ScalarValue.ofBool(value));
    }

    private ScalarSpec(Kind kind, ScalarValue value) {
        this.kind = Objects.requireNonNull(kind, "kind");
        this.value = value;
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
        if (t.dtype() == ScalarType.Bool && (kind == Kind.SUB || kind == Kind.RSUB)) {
            throw new IllegalArgumentException(name() + ": subtraction with a bool tensor is not supported, as in torch; got " + t
                + "; convert it with to(dtype) first");
        }
        ScalarType dtype = value.promote(t.dtype());
        if ((kind == Kind.DIV || kind == Kind.RDIV) && !Rules.isFloating(dtype)) {
            dtype = ScalarType.Float;
        }
        value.checkFits(name(), dtype);
        return List.of(new TensorMeta(t.shape(), dtype, t.sharding()));
    }

    /**
     * The element-wise rule's cheapest placements ({@link PointwiseStrategy}) under the ATen overload of this kind: only a
     * product or quotient by the scalar keeps partial sums.
     */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        String overload = switch (kind) {
            case ADD, SUB, MUL, DIV, RSUB -> "aten::" + name() + ".Scalar";
            case RDIV -> "aten::reciprocal";
        };
        return PointwiseStrategy.decide(overload, inputs, inputs.getFirst().shape(), 1);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        ScalarType dtype = op.outputs().getFirst().meta().dtype();
        return new LocalKernel(in -> {
            // libtorch sees a bool scalar as an integer: computing in the promoted dtype keeps torch's result dtype.
            Tensor input = in.getFirst();
            boolean convert = input.scalar_type().intern() != dtype && !(kind == Kind.DIV || kind == Kind.RDIV);
            try (Tensor t = convert ? input.to(dtype) : new Tensor(input); Scalar s = value.toScalar();
                 Tensor result = switch (kind) {
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
                }) {
                return result.scalar_type().intern() == dtype ? new Tensor(result) : result.to(dtype);
            }
        });
    }

    public Kind kind() {
        return kind;
    }

    /** The scalar as a double: what a derivative scales by. */
    public double scalar() {
        return value.doubleValue();
    }

    ScalarValue value() {
        return value;
    }

    static ScalarSpec restore(Kind kind, ScalarValue value) {
        return new ScalarSpec(kind, value);
    }
}
