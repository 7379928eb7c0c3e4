package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import org.dtorch.api.DTensor;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of ATen backward operators that the derivatives of activations, pooling and selections issue, so
 * that a backward pass recorded with {@code create_graph} differentiates again, with libtorch's formulas. Each is
 * linear in the gradient it takes, so that gradient's own gradient is the operator's adjoint applied to the incoming
 * one (the same operator for the activations, the pooling for its backward, the selection for a placement at indices);
 * the input's is zero where the operator is piecewise linear in it ({@code leaky_relu}, {@code hardtanh}, pooling), and
 * the activation's second derivative otherwise ({@code softplus}, {@code elu}).
 *
 * <p>Thread-safe: stateless.
 */
final class BackwardDerivatives {
    private BackwardDerivatives() {
    }

    /** The derivative of {@code call}, or null when this class has none for it. */
    static Derivative of(AtenCall call) {
        return switch (call.overload().name()) {
            case "leaky_relu_backward" -> same(call, "leaky_relu_backward", "T,T,f,b", "negative_slope", "self_is_result");
            case "hardtanh_backward" -> same(call, "hardtanh_backward", "T,T,f,f", "min_val", "max_val");
            case "softplus_backward" -> softplus(call);
            case "elu_backward" -> elu(call);
            case "avg_pool2d_backward", "avg_pool3d_backward" -> avgPool(call);
            case "max_pool2d_with_indices_backward", "adaptive_max_pool2d_backward" -> (in, out, g, n) -> new DTensor[] {
                n[0] ? gatherAtIndices(g[0], in[in.length - 1]) : null, null, null};
            case "index_select_backward" -> {
                long dim = (Long) call.constant("dim");
                yield (in, out, g, n) -> new DTensor[] {n[0] ? aten("index_select", "T,i,T", v(null, dim, null), g[0], in[1]) : null, null};
            }
            case "value_selecting_reduction_backward" -> {
                long dim = (Long) call.constant("dim");
                boolean keepdim = Boolean.TRUE.equals(call.constant("keepdim"));
                yield (in, out, g, n) -> new DTensor[] {n[0] ? atIndices(g[0], in[1], dim, keepdim) : null, null};
            }
            default -> null;
        };
    }

    /** {@code g}'s values at {@code indices} along {@code dim}: the adjoint of placing values there. */
    private static DTensor atIndices(DTensor g, DTensor indices, long dim, boolean keepdim) {
        DTensor where = keepdim ? indices : aten("unsqueeze", "T,i", v(null, dim), indices);
        DTensor picked = aten("gather", "T,i,T", v(null, dim, null), g, where);
        return keepdim ? picked : aten("squeeze", "T,i", v(null, dim), picked);
    }

    /** The gradient's gradient: {@code name} on the incoming gradient and the same input, with the call's constants. */
    private static Derivative same(AtenCall call, String name, String key, String first, String second) {
        Object a = call.constant(first);
        Object b = call.constant(second);
        return (in, out, g, n) -> new DTensor[] {n[0] ? aten(name, key, v(null, null, a, b), g[0], in[1]) : null, null};
    }

    /**
     * {@code softplus_backward(g, x, beta, threshold) = g * sigmoid(beta * x)} below the threshold ({@code g} above it):
     * its derivative in {@code x} is {@code g * beta * z / (1 + z)^2} with {@code z = exp(beta * x)}, zero above.
     */
    private static Derivative softplus(AtenCall call) {
        double beta = ((Number) call.constant("beta")).doubleValue();
        double threshold = ((Number) call.constant("threshold")).doubleValue();
        return (in, out, g, n) -> {
            DTensor x = in[1];
            DTensor gg = n[0] ? aten("softplus_backward", "T,T,f,f", v(null, null, beta, threshold), g[0], x) : null;
            DTensor gx = null;
            if (n[1]) {
                DTensor s = x.mul(beta).sigmoid();
                DTensor curve = s.mul(s.rsub(1.0)).mul(beta);
                gx = g[0].runtime().where(x.mul(beta).le(threshold), g[0].mul(in[0]).mul(curve), 0.0);
            }
            return new DTensor[] {gg, gx};
        };
    }

    /**
     * {@code elu_backward} of an input (not of a result): {@code g * scale * alpha * input_scale * exp(x * input_scale)}
     * where {@code x <= 0}, {@code g * scale} elsewhere; its derivative in {@code x} is the first branch times
     * {@code input_scale} there, zero elsewhere.
     */
    private static Derivative elu(AtenCall call) {
        if (Boolean.TRUE.equals(call.constant("is_result"))) {
            return null;
        }
        double alpha = ((Number) call.constant("alpha")).doubleValue();
        double scale = ((Number) call.constant("scale")).doubleValue();
        double inputScale = ((Number) call.constant("input_scale")).doubleValue();
        return (in, out, g, n) -> {
            DTensor x = in[1];
            DTensor gg = n[0] ? aten("elu_backward", "T,f,f,f,b,T", v(null, alpha, scale, inputScale, false, null), g[0], x) : null;
            DTensor gx = null;
            if (n[1]) {
                DTensor curve = x.mul(inputScale).exp().mul(scale * alpha * inputScale * inputScale);
                gx = g[0].runtime().where(x.le(0.0), g[0].mul(in[0]).mul(curve), 0.0);
            }
            return new DTensor[] {gg, gx};
        };
    }

    /** {@code avg_pool*_backward} is linear in the gradient it takes: its adjoint is the pooling. */
    private static Derivative avgPool(AtenCall call) {
        boolean three = call.overload().name().contains("3d");
        Object divisor = call.constant("divisor_override");
        Object[] values = v(null, call.constant("kernel_size"), call.constant("stride"), call.constant("padding"),
            call.constant("ceil_mode"), call.constant("count_include_pad"), divisor);
        String key = "T,[i],[i],[i],b,b," + (divisor == null ? "n" : "i");
        return (in, out, g, n) -> new DTensor[] {n[0] ? aten(three ? "avg_pool3d" : "avg_pool2d", key, lists(values), g[0]) : null, null};
    }

    /** {@code values} with every {@code long[]} as the list an {@code int[]} parameter takes. */
    private static Object[] lists(Object[] values) {
        Object[] out = values.clone();
        for (int i = 0; i < out.length; i++) {
            if (out[i] instanceof long[] l) {
                out[i] = Grads.list(l);
            }
        }
        return out;
    }

    /**
     * The max-pooling backward operators put each output cell's gradient at its index within its plane: their adjoint
     * reads the incoming gradient at those indices.
     */
    private static DTensor gatherAtIndices(DTensor g, DTensor indices) {
        int planes = indices.ndim() - 2;
        DTensor flat = g.reshape(planesThenRest(g.shape(), planes));
        DTensor where = indices.reshape(planesThenRest(indices.shape(), planes));
        return aten("gather", "T,i,T", v(null, (long) planes, null), flat, where).reshape(indices.shape());
    }

    /** The leading {@code planes} dimensions of {@code shape}, then the rest as one. */
    private static long[] planesThenRest(long[] shape, int planes) {
        long[] out = new long[planes + 1];
        long rest = 1;
        for (int i = 0; i < shape.length; i++) {
            if (i < planes) {
                out[i] = shape[i];
            } else {
                rest *= shape[i];
            }
        }
        out[planes] = rest;
        return out;
    }
}
