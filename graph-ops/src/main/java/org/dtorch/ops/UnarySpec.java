package org.dtorch.ops;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Element-wise functions of one tensor: {@code neg}, {@code relu}, {@code silu}, {@code gelu},
 * {@code exp}, {@code tanh}, {@code sigmoid}. The transcendental ones turn integral tensors into float32.
 *
 * <p>Sharding rule: S and R pass through; {@code P(sum)} only for {@code neg}, the one linear function.
 *
 * <p>Thread-safe: immutable.
 */
public final class UnarySpec implements OpSpec, ShardsPassThrough {
    /** The functions. */
    public enum Kind { NEG, RELU, SILU, GELU, EXP, TANH, SIGMOID }

    private final Kind kind;
    /** The operator's name, as every trace span and profile row of it reads it. */
    private final String name;

    /** The spec of {@code kind}. */
    public static UnarySpec of(Kind kind) {
        return INSTANCES[kind.ordinal()];
    }

    private static final UnarySpec[] INSTANCES = java.util.Arrays.stream(Kind.values()).map(UnarySpec::new).toArray(UnarySpec[]::new);

    /** The kernel of every operator of this kind on every device: it keeps nothing between calls. */
    private final DeviceKernel kernel;

    private UnarySpec(Kind kind) {
        this.kind = kind;
        this.name = kind.name().toLowerCase(java.util.Locale.ROOT);
        this.kernel = newKernel();
    }

    @Override
    public String name() {
        return name;
    }

    private boolean floatingResult() {
        return kind != Kind.NEG && kind != Kind.RELU;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placements().get(m);
            if (p.isPartial() && !(kind == Kind.NEG && Rules.isPartialSum(p))) {
                throw Rules.reject(name(), inputs, m, name() + " is not linear, so it cannot apply to partial values " + p,
                    kind == Kind.NEG ? "S, R or P(sum)" : "S or R");
            }
        }
        ScalarType dtype = floatingResult() && !Rules.isFloating(t.dtype()) ? ScalarType.Float : t.dtype();
        return List.of(new TensorMeta(t.shape(), dtype, t.sharding()));
    }

    /** The element-wise rule's cheapest placements ({@link PointwiseStrategy}): only {@code neg} keeps partial sums. */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        return PointwiseStrategy.decide("aten::" + name(), inputs, inputs.getFirst().shape(), 1);
    }

    private DeviceKernel newKernel() {
        return new LocalKernel(in -> {
            Tensor input = in.getFirst();
            boolean cast = floatingResult() && !Rules.isFloating(TorchTensors.dtype(input));
            try (Tensor t = cast ? input.to(ScalarType.Float) : new Tensor(input)) {
                return switch (kind) {
                    case NEG -> t.neg();
                    case RELU -> t.relu();
                    case SILU -> torch.silu(t);
                    case GELU -> torch.gelu(t);
                    case EXP -> t.exp();
                    case TANH -> t.tanh();
                    case SIGMOID -> t.sigmoid();
                };
            }
        });
    }

    /** One shared, stateless kernel per kind, so that a worker allocates no kernel or lambda per operator. */
    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return kernel;
    }

    public Kind kind() {
        return kind;
    }
}
