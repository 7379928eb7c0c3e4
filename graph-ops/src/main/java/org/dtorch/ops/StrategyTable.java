package org.dtorch.ops;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.Overload;
import org.dtorch.ops.aten.ParamType;

/**
 * Which {@link ShardingStrategy} runs an ATen operator on distributed tensors: by operator name (and overload where
 * one name has overloads of two families, as {@code max.other} is element-wise and {@code max.dim} a reduction, or by a
 * constant, as dropout with {@code train=False} is the identity).
 * Views and shape operators go to the {@link ViewStrategy}. Operators in no family get the {@link ReplicateStrategy}, with a warning once per operator
 * ({@link org.dtorch.api.DTorch#aten}).
 *
 * <p>Immutable. Thread-safe.
 */
public final class StrategyTable {
    /** Element-wise operators (with broadcasting) of libtorch, by name. */
    static final Set<String> POINTWISE = Set.of(
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
        "bitwise_not", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "ceil", "celu", "clamp",
        "clamp_max", "clamp_min", "clip", "clone", "copysign", "cos", "cosh", "deg2rad", "digamma", "div", "elu", "eq", "erf",
        "erfc", "erfinv", "exp", "exp2", "expm1", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod", "frac", "ge",
        "gelu", "gt", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "heaviside", "hypot", "isfinite", "isinf", "isnan",
        "le", "leaky_relu", "lerp", "lgamma", "log", "log10", "log1p", "log2", "logaddexp", "logical_and", "logical_not",
        "logical_or", "logical_xor", "logit", "lt", "masked_fill", "maximum", "minimum", "mish", "mul", "nan_to_num", "ne",
        "neg", "positive", "pow", "rad2deg", "reciprocal", "relu", "relu6", "remainder", "round", "rsqrt", "rsub", "selu",
        "sgn", "sigmoid", "sign", "signbit", "silu", "sin", "sinc", "sinh", "softplus", "softshrink", "sqrt", "square", "sub",
        "tan", "tanh", "threshold", "true_divide", "trunc", "where", "xlogy");
    /**
     * The element-wise derivatives autograd issues, on inputs of one shape: each output element reads the same element of
     * every input (they do not broadcast as the operators above do, so the pointwise walks leave them out).
     */
    private static final Set<String> POINTWISE_DERIVATIVES = Set.of("threshold_backward", "silu_backward", "gelu_backward",
        "tanh_backward", "sigmoid_backward", "softplus_backward", "leaky_relu_backward", "hardtanh_backward", "elu_backward");
    /** Reductions over dimensions, by name. */
    static final Set<String> REDUCTIONS = Set.of(
        "sum", "nansum", "mean", "nanmean", "amax", "amin", "prod", "argmax", "argmin", "var", "std", "norm",
        "linalg_vector_norm", "logsumexp", "count_nonzero", "all", "any", "max", "min");
    /** The strategies of the overloads seen, whose choice depends on the overload alone; a refusal is not kept. */
    private static final Map<Overload, ShardingStrategy> BY_OVERLOAD = new ConcurrentHashMap<>();
    /**
     * A view overload's strategy by its number of tensor inputs (a view is one of its family only with the inputs its
     * form takes). Views are a third of a decode step's operators, so they are not chosen again each time. An entry is
     * written once; two threads that race write the same strategy.
     */
    private static final Map<Overload, ShardingStrategy[]> VIEWS_BY_INPUTS = new ConcurrentHashMap<>();
    /** Names in both tables: these overloads are element-wise, the others reductions. */
    private static final Set<String> POINTWISE_OVERLOADS = Set.of("aten::max.other", "aten::min.other");
    /** Operators that draw random numbers: each device would draw its own, so replicas would differ. */
    private static final Set<String> RANDOM = Set.of("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout",
        "native_dropout", "bernoulli", "rrelu", "rand_like", "randn_like", "randint_like", "multinomial", "normal", "poisson");

    private StrategyTable() {
    }

    /**
     * The strategy of {@code call}.
     *
     * @throws UnsupportedOperationException for in-place and {@code out=} forms and for random operators, which the
     *                                       generic path cannot run correctly yet
     */
    public static ShardingStrategy of(AtenCall call) {
        Overload o = call.overload();
        ShardingStrategy known = BY_OVERLOAD.get(o);
        if (known != null) {
            return known;
        }
        if (ViewStrategy.NAMES.contains(o.name())) {
            return viewStrategy(call);
        }
        ShardingStrategy found = choose(call);
        // Dropout's strategy depends on its train flag: it is chosen per call.
        if (!DropoutStrategy.NAMES.contains(o.name())) {
            BY_OVERLOAD.put(o, found);
        }
        return found;
    }

    private static ShardingStrategy viewStrategy(AtenCall call) {
        ShardingStrategy[] byInputs = VIEWS_BY_INPUTS.computeIfAbsent(call.overload(), o -> new ShardingStrategy[o.params().size() + 1]);
        int inputs = call.inputCount();
        if (inputs >= byInputs.length) {
            return choose(call);
        }
        ShardingStrategy found = byInputs[inputs];
        if (found == null) {
            found = choose(call);
            byInputs[inputs] = found;
        }
        return found;
    }

    private static ShardingStrategy choose(AtenCall call) {
        Overload o = call.overload();
        String name = o.name();
        if (name.endsWith("_") || o.overloadName().contains("out") || call.hasParam("out")) {
            throw new UnsupportedOperationException(call.qualifiedName() + ": in-place and out= forms are not supported on distributed "
                + "tensors yet; use the functional form (" + name.replaceAll("_$", "") + ")");
        }
        if (DropoutStrategy.isIdentity(call)) {
            return DropoutStrategy.INSTANCE;
        }
        if (RANDOM.contains(name) || o.params().stream().anyMatch(p -> p.type().base() == ParamType.Base.GENERATOR)) {
            throw new UnsupportedOperationException(call.qualifiedName() + " draws random numbers, which the generic distributed path "
                + "cannot yet draw consistently across devices" + (DropoutStrategy.NAMES.contains(name) ? " (in training: "
                + "dtorch.nn.functional.dropout draws its mask from a seeded factory; in evaluation, train=False, it is the identity)" : ""));
        }
        if (POINTWISE_OVERLOADS.contains(call.qualifiedName()) || POINTWISE.contains(name) && !REDUCTIONS.contains(name)
            || POINTWISE_DERIVATIVES.contains(name)) {
            return PointwiseStrategy.INSTANCE;
        }
        if (REDUCTIONS.contains(name)) {
            return ReductionStrategy.INSTANCE;
        }
        if (MatmulStrategy.NAMES.contains(name)) {
            return MatmulStrategy.INSTANCE;
        }
        if (NormalizationStrategy.covers(name)) {
            return NormalizationStrategy.INSTANCE;
        }
        if (name.equals("batch_norm")) {
            return BatchNormStrategy.INSTANCE;
        }
        if (name.equals(RmsNormBackwardStrategy.NAME)) {
            return RmsNormBackwardStrategy.INSTANCE;
        }
        if (name.equals("embedding")) {
            return EmbeddingStrategy.INSTANCE;
        }
        if (LossStrategy.FORWARD.contains(name) || LossStrategy.BACKWARD.contains(name)) {
            return LossStrategy.INSTANCE;
        }
        if (name.equals("index_add")) {
            return IndexAddStrategy.INSTANCE;
        }
        if (AlongDimStrategy.NAMES.contains(name)) {
            return AlongDimStrategy.INSTANCE;
        }
        if (ConcatSplitStrategy.JOINS.contains(name) || ConcatSplitStrategy.SPLITS.contains(name)) {
            return ConcatSplitStrategy.INSTANCE;
        }
        if (ConvolutionStrategy.NAMES.contains(name)) {
            return ConvolutionStrategy.INSTANCE;
        }
        if (SpatialStrategy.POOLING.contains(name) || SpatialStrategy.POOLING_BACKWARD.contains(name)) {
            return SpatialStrategy.POOLING_INSTANCE;
        }
        if (SpatialStrategy.INTERPOLATE.contains(name)) {
            return SpatialStrategy.INTERPOLATE_INSTANCE;
        }
        if (AttentionStrategy.NAMES.contains(name)) {
            return AttentionStrategy.INSTANCE;
        }
        if (ViewStrategy.covers(call)) {
            return ViewStrategy.INSTANCE;
        }
        return ReplicateStrategy.INSTANCE;
    }

    /** The element-wise operator names the table knows (for tests that walk it). */
    public static Set<String> pointwiseNames() {
        return POINTWISE;
    }

    /** The normalization names the table knows, softmax included (for tests that walk it). */
    public static Set<String> normalizationNames() {
        return NormalizationStrategy.names();
    }

    /** The names of operators that join tensor lists or cut tensors into lists (for tests that walk them). */
    public static Set<String> concatSplitNames() {
        return Stream.concat(ConcatSplitStrategy.JOINS.stream(), ConcatSplitStrategy.SPLITS.stream()).collect(Collectors.toUnmodifiableSet());
    }

    /** The reduction names the table knows (for tests that walk it). */
    public static Set<String> reductionNames() {
        return REDUCTIONS;
    }
}
