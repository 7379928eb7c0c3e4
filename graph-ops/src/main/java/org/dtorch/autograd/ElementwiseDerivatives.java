package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.sumTo;
import static org.dtorch.autograd.Grads.v;

import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of element-wise ATen operators beyond the basic arithmetic: ATen's backward operators where it has
 * them ({@code softplus_backward}, {@code leaky_relu_backward}, {@code hardtanh_backward} (also for {@code relu6}),
 * {@code elu_backward}), and
 * libtorch's formulas otherwise ({@code abs}: {@code g * sgn(x)}; {@code clamp}: {@code g} where the input lies within
 * the bounds; {@code maximum}/{@code minimum}: {@code g} to the larger (smaller) input and half of it to each of a tie;
 * {@code sign}: zero; {@code where} with a number for one branch: {@code g} where the tensor branch was chosen).
 * Every one is element-wise itself, so it keeps the placements of its inputs.
 *
 * <p>Thread-safe: stateless.
 */
final class ElementwiseDerivatives {
    /** {@code 2 / sqrt(pi)}: the factor of {@code erf}'s derivative. */
    private static final double TWO_OVER_SQRT_PI = 2.0 / Math.sqrt(Math.PI);

    private ElementwiseDerivatives() {
    }

    /** The derivative of {@code call}, or null when this class has none for it. */
    static Derivative of(AtenCall call) {
        String name = call.overload().name();
        boolean oneInput = call.inputCount() == 1;
        return switch (name) {
            case "sign", "sgn" -> (in, out, g, n) -> new DTensor[] {g[0].mul(0.0)};
            case "abs" -> (in, out, g, n) -> new DTensor[] {g[0].mul(aten("sgn", "T", v((Object) null), in[0]))};
            case "square" -> (in, out, g, n) -> new DTensor[] {g[0].mul(in[0]).mul(2.0)};
            case "log1p" -> (in, out, g, n) -> new DTensor[] {g[0].div(in[0].add(1.0))};
            case "expm1" -> (in, out, g, n) -> new DTensor[] {g[0].mul(out[0].add(1.0))};
            case "erf" -> (in, out, g, n) -> new DTensor[] {g[0].mul(in[0].mul(in[0]).neg().exp()).mul(TWO_OVER_SQRT_PI)};
            case "clamp", "clip" -> oneInput ? clamp(number(call.constant("min")), number(call.constant("max")))
                : clampByTensors(call.inputNames().indexOf("min"), call.inputNames().indexOf("max"));
            case "clamp_min" -> oneInput ? clamp(number(call.constant("min")), null) : clampByTensors(1, -1);
            case "clamp_max" -> oneInput ? clamp(null, number(call.constant("max"))) : clampByTensors(-1, 1);
            case "maximum" -> call.inputCount() == 2 ? extremum(true) : null;
            case "minimum" -> call.inputCount() == 2 ? extremum(false) : null;
            case "max", "min" -> call.inputCount() == 2 && call.overload().overloadName().equals("other") ? extremum(name.equals("max")) : null;
            case "softplus" -> {
                double beta = number(call.constant("beta"));
                double threshold = number(call.constant("threshold"));
                yield (in, out, g, n) -> new DTensor[] {aten("softplus_backward", "T,T,f,f", v(null, null, beta, threshold), g[0], in[0])};
            }
            case "leaky_relu" -> {
                double slope = number(call.constant("negative_slope"));
                yield (in, out, g, n) -> new DTensor[] {aten("leaky_relu_backward", "T,T,f,b", v(null, null, slope, false), g[0], in[0])};
            }
            case "hardtanh" -> {
                double low = number(call.constant("min_val"));
                double high = number(call.constant("max_val"));
                yield (in, out, g, n) -> new DTensor[] {aten("hardtanh_backward", "T,T,f,f", v(null, null, low, high), g[0], in[0])};
            }
            case "relu6" -> (in, out, g, n) -> new DTensor[] {aten("hardtanh_backward", "T,T,f,f", v(null, null, 0.0, 6.0), g[0], in[0])};
            case "elu" -> {
                double alpha = number(call.constant("alpha"));
                double scale = number(call.constant("scale"));
                double inputScale = number(call.constant("input_scale"));
                yield (in, out, g, n) -> new DTensor[] {
                    aten("elu_backward", "T,f,f,f,b,T", v(null, alpha, scale, inputScale, false, null), g[0], in[0])};
            }
            default -> null;
        };
    }

    /**
     * {@code where(condition, x, number)} or {@code where(condition, number, x)}: {@code g} to {@code x} where it was
     * chosen, summed to its shape where it broadcasts; null for two numbers (nothing to differentiate).
     */
    static Derivative whereWithNumber(List<String> names) {
        boolean chosenWhereTrue = names.contains("self");
        if (names.size() != 2 || !chosenWhereTrue && !names.contains("other")) {
            return null;
        }
        return (in, out, g, n) -> new DTensor[] {null, n[1] ? sumTo(chosenWhereTrue
            ? g[0].runtime().where(in[0], g[0], 0.0) : g[0].runtime().where(in[0], 0.0, g[0]), in[1].shape()) : null};
    }

    private static Double number(Object value) {
        return value instanceof Number x ? x.doubleValue() : null;
    }

    /** {@code g} where {@code min <= x <= max} (a missing bound always holds), zero elsewhere, as libtorch's clamp. */
    private static Derivative clamp(Double min, Double max) {
        return (in, out, g, n) -> {
            DTensor x = in[0];
            DTensor inside = min == null ? null : x.ge(min);
            if (max != null) {
                inside = inside == null ? x.le(max) : inside.logicalAnd(x.le(max));
            }
            return new DTensor[] {inside == null ? g[0] : g[0].runtime().where(inside, g[0], 0.0)};
        };
    }

    /**
     * {@code clamp} with tensor bounds (inputs {@code lo} and {@code hi}, -1 where absent), as libtorch: {@code g} to the
     * input where it lies within the bounds, to the lower bound where the input is below it (and the bounds are in
     * order), to the upper bound where the input is above it or the bounds are crossed (the result is the upper bound
     * then); each summed back to its own shape where they broadcast.
     */
    private static Derivative clampByTensors(int lo, int hi) {
        return (in, out, g, n) -> {
            DTensor x = in[0];
            DTensor min = lo < 0 ? null : in[lo];
            DTensor max = hi < 0 ? null : in[hi];
            DTensor[] result = new DTensor[in.length];
            DTensor inside = min == null ? x.le(max) : max == null ? x.ge(min) : x.ge(min).logicalAnd(x.le(max));
            if (n[0]) {
                result[0] = sumTo(g[0].runtime().where(inside, g[0], 0.0), x.shape());
            }
            if (min != null && n[lo]) {
                DTensor below = max == null ? x.lt(min) : x.lt(min).logicalAnd(min.lt(max));
                result[lo] = sumTo(g[0].runtime().where(below, g[0], 0.0), min.shape());
            }
            if (max != null && n[hi]) {
                DTensor above = min == null ? x.gt(max) : x.gt(max).logicalOr(max.lt(min));
                result[hi] = sumTo(g[0].runtime().where(above, g[0], 0.0), max.shape());
            }
            return result;
        };
    }

    /**
     * {@code maximum(a, b)} (or {@code minimum}): {@code g} to the input that is larger (smaller), half of {@code g} to each
     * where they are equal, as libtorch splits a tie; each summed back to its input's shape where the inputs broadcast.
     */
    private static Derivative extremum(boolean max) {
        return (in, out, g, n) -> {
            DTensor a = in[0];
            DTensor b = in[1];
            DTensor tie = a.eq(b);
            DTensor shared = g[0].runtime().where(tie, g[0].mul(0.5), g[0]);
            DTensor aLoses = max ? a.lt(b) : a.gt(b);
            DTensor bLoses = max ? a.gt(b) : a.lt(b);
            return new DTensor[] {
                n[0] ? sumTo(shared.runtime().where(aLoses, 0.0, shared), a.shape()) : null,
                n[1] ? sumTo(shared.runtime().where(bLoses, 0.0, shared), b.shape()) : null};
        };
    }
}
