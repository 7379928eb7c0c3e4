package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.list;
import static org.dtorch.autograd.Grads.sumTo;
import static org.dtorch.autograd.Grads.v;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of ATen operators, by operator name: ATen's own backward operators where it has them
 * ({@code threshold_backward}, {@code silu_backward}, {@code gelu_backward}, {@code tanh_backward},
 * {@code sigmoid_backward}, {@code _softmax_backward_data}, {@code _log_softmax_backward_data}, {@code nll_loss_backward},
 * {@code slice_backward} for strided slices), and compositions of distributed operators for the rest (products
 * with transposes, sums that undo broadcasting, the inverse of a view). A distributed operator needs a meta kernel to
 * infer its outputs, which {@code native_layer_norm_backward}, {@code embedding_dense_backward} and
 * {@code mse_loss_backward} lack in libtorch: their formulas are compositions here ({@code _fused_rms_norm_backward}
 * lacks one too, and has a shape rule of its own). Composite operators whose backward ATen does not provide as one
 * operator (RMS norm without a weight, scaled dot product attention) recompute what they need from the saved inputs.
 *
 * <p>Thread-safe: stateless.
 */
final class AtenDerivatives {
    /** {@code output_mask} asking for both gradients. */
    private static final List<Boolean> BOTH = List.of(true, true);

    private AtenDerivatives() {
    }

    /** The derivative of {@code call}, or null when it has none. */
    static Derivative of(AtenCall call, DTensor[] inputs) {
        List<String> names = call.inputNames();
        String name = call.overload().name();
        return switch (name) {
            case "add", "sub" -> addSub(call, name.equals("sub"));
            case "mul" -> mul(call);
            case "div" -> call.constant("rounding_mode") != null ? null : div(call);
            case "neg" -> (in, out, g, n) -> new DTensor[] {g[0].neg()};
            case "pow" -> call.inputCount() == 1 && call.hasParam("exponent") && call.constant("exponent") instanceof Number e
                ? pow(e.doubleValue()) : null;
            case "rsqrt" -> (in, out, g, n) -> new DTensor[] {g[0].mul(out[0]).mul(out[0]).mul(out[0]).mul(-0.5)};
            case "sqrt" -> (in, out, g, n) -> new DTensor[] {g[0].div(out[0]).mul(0.5)};
            case "exp" -> (in, out, g, n) -> new DTensor[] {g[0].mul(out[0])};
            case "log" -> (in, out, g, n) -> new DTensor[] {g[0].div(in[0])};
            case "sin" -> (in, out, g, n) -> new DTensor[] {g[0].mul(aten("cos", "T", v((Object) null), in[0]))};
            case "cos" -> (in, out, g, n) -> new DTensor[] {g[0].mul(aten("sin", "T", v((Object) null), in[0])).neg()};
            case "relu" -> (in, out, g, n) -> new DTensor[] {aten("threshold_backward", "T,T,i", v(null, null, 0L), g[0], out[0])};
            case "silu" -> (in, out, g, n) -> new DTensor[] {aten("silu_backward", "T,T", v(null, null), g[0], in[0])};
            case "gelu" -> {
                String approximate = "tanh".equals(call.constant("approximate")) ? "tanh" : "none";
                yield (in, out, g, n) -> new DTensor[] {aten("gelu_backward", "T,T|approximate=s", v(null, null, approximate), g[0], in[0])};
            }
            case "tanh" -> (in, out, g, n) -> new DTensor[] {aten("tanh_backward", "T,T", v(null, null), g[0], out[0])};
            case "sigmoid" -> (in, out, g, n) -> new DTensor[] {aten("sigmoid_backward", "T,T", v(null, null), g[0], out[0])};
            // the backward operators of the activations, so that a recorded backward pass differentiates again
            case "tanh_backward" -> (in, out, g, n) -> new DTensor[] {
                n[0] ? aten("tanh_backward", "T,T", v(null, null), g[0], in[1]) : null,
                n[1] ? g[0].mul(in[0]).mul(in[1]).mul(-2.0) : null};
            case "sigmoid_backward" -> (in, out, g, n) -> new DTensor[] {
                n[0] ? aten("sigmoid_backward", "T,T", v(null, null), g[0], in[1]) : null,
                n[1] ? g[0].mul(in[0]).mul(in[1].mul(-2.0).add(1.0)) : null};
            case "threshold_backward" -> call.constant("threshold") instanceof Long t
                ? (in, out, g, n) -> new DTensor[] {n[0] ? aten("threshold_backward", "T,T,i", v(null, null, t), g[0], in[1]) : null, null}
                : null;
            case "softmax", "_softmax" -> softmax(call, "_softmax_backward_data");
            case "log_softmax", "_log_softmax" -> softmax(call, "_log_softmax_backward_data");
            case "sum", "mean" -> reduction(call, name.equals("mean"));
            case "view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze", "view_as", "reshape_as" ->
                (in, out, g, n) -> new DTensor[] {g[0].reshape(in[0].shape())};
            case "clone", "contiguous", "alias" -> (in, out, g, n) -> new DTensor[] {g[0]};
            case "detach" -> (in, out, g, n) -> new DTensor[] {null};
            case "transpose" -> {
                int a = ((Long) call.constant("dim0")).intValue();
                int b = ((Long) call.constant("dim1")).intValue();
                yield (in, out, g, n) -> new DTensor[] {g[0].transpose(a, b)};
            }
            case "t" -> (in, out, g, n) -> new DTensor[] {in[0].ndim() < 2 ? g[0] : g[0].transpose(0, 1)};
            case "permute" -> permute((long[]) call.constant("dims"));
            case "expand", "expand_as" -> (in, out, g, n) -> new DTensor[] {sumTo(g[0], in[0].shape()), null};
            case "slice" -> slice(call);
            case "narrow" -> narrow(call);
            case "constant_pad_nd" -> constantPad(call);
            case "select" -> select(call);
            case "cat" -> cat(call);
            case "split", "split_with_sizes", "chunk", "unbind" -> split(call, name.equals("unbind"));
            case "mm", "bmm", "matmul" -> (in, out, g, n) -> matmul(in[0], in[1], g[0], n);
            case "linear" -> (in, out, g, n) -> linear(in, g[0], n);
            case "layer_norm", "native_layer_norm" -> layerNorm(call, names);
            case "rms_norm" -> rmsNorm(call, names);
            case "embedding" -> embedding(call);
            case "mse_loss" -> mseLoss(call);
            case "cross_entropy_loss" -> LossDerivatives.crossEntropy(call, names, inputs);
            case "nll_loss", "nll_loss_nd" -> LossDerivatives.nllLoss(call, names);
            case "scaled_dot_product_attention" -> Attention.of(call, names);
            case "where" -> names.size() == 3 ? where() : ElementwiseDerivatives.whereWithNumber(names);
            case "masked_fill" -> call.inputCount() == 2 ? (in, out, g, n) -> new DTensor[] {
                aten("masked_fill", "T,T,f", v(null, null, 0.0), g[0], in[1]), null} : null;
            default -> other(call, names, inputs);
        };
    }

    /** The derivatives of the element-wise, selecting, backward and layer operators, which live in classes of their own. */
    private static Derivative other(AtenCall call, List<String> names, DTensor[] inputs) {
        Derivative d = ElementwiseDerivatives.of(call);
        if (d == null) {
            d = SelectionDerivatives.of(call);
        }
        if (d == null) {
            d = BackwardDerivatives.of(call);
        }
        return d != null ? d : LayerDerivatives.of(call, names, inputs);
    }

    private static Derivative addSub(AtenCall call, boolean sub) {
        Object alphaValue = call.constant("alpha");
        double alpha = alphaValue instanceof Number a ? a.doubleValue() : 1.0;
        double other = sub ? -alpha : alpha;
        if (call.inputCount() == 1) {
            return (in, out, g, n) -> new DTensor[] {g[0]};
        }
        return (in, out, g, n) -> new DTensor[] {
            n[0] ? sumTo(g[0], in[0].shape()) : null,
            n[1] ? sumTo(other == 1.0 ? g[0] : g[0].mul(other), in[1].shape()) : null};
    }

    private static Derivative mul(AtenCall call) {
        if (call.inputCount() == 1) {
            double s = ((Number) call.constant("other")).doubleValue();
            return (in, out, g, n) -> new DTensor[] {g[0].mul(s)};
        }
        return (in, out, g, n) -> new DTensor[] {
            n[0] ? sumTo(g[0].mul(in[1]), in[0].shape()) : null,
            n[1] ? sumTo(g[0].mul(in[0]), in[1].shape()) : null};
    }

    private static Derivative div(AtenCall call) {
        if (call.inputCount() == 1) {
            double s = ((Number) call.constant("other")).doubleValue();
            return (in, out, g, n) -> new DTensor[] {g[0].div(s)};
        }
        return (in, out, g, n) -> new DTensor[] {
            n[0] ? sumTo(g[0].div(in[1]), in[0].shape()) : null,
            n[1] ? sumTo(g[0].mul(out[0]).div(in[1]).neg(), in[1].shape()) : null};
    }

    private static Derivative pow(double e) {
        return (in, out, g, n) -> new DTensor[] {
            e == 2.0 ? g[0].mul(in[0]).mul(2.0) : g[0].mul(aten("pow", "T,f", v(null, e - 1.0), in[0])).mul(e)};
    }

    private static Derivative softmax(AtenCall call, String backward) {
        long dim = (Long) call.constant("dim");
        return (in, out, g, n) -> {
            ScalarType inputDtype = in[0].dtype();
            return new DTensor[] {aten(backward, "T,T,i,d", v(null, null, dim, inputDtype), g[0], out[0])};
        };
    }

    private static Derivative reduction(AtenCall call, boolean mean) {
        if (call.inputCount() != 1 || mean && call.constant("dtype") != null) {
            return null;
        }
        Object dimValue = call.hasParam("dim") ? call.constant("dim") : null;
        boolean keepdim = Boolean.TRUE.equals(call.hasParam("keepdim") ? call.constant("keepdim") : null);
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            int[] given = dimValue instanceof long[] l ? Arrays.stream(l).mapToInt(x -> (int) x).toArray() : new int[0];
            int[] dims = Grads.normalize(given, shape.length);
            DTensor gx = Grads.unreduce(g[0], shape, dims, keepdim);
            if (gx.dtype() != in[0].dtype()) {
                gx = gx.to(in[0].dtype());
            }
            return new DTensor[] {mean ? gx.div((double) Grads.count(shape, dims)) : gx};
        };
    }

    private static Derivative permute(long[] dims) {
        return (in, out, g, n) -> {
            int[] back = new int[dims.length];
            for (int i = 0; i < dims.length; i++) {
                int d = (int) (dims[i] < 0 ? dims[i] + dims.length : dims[i]);
                back[d] = i;
            }
            return new DTensor[] {g[0].permute(back)};
        };
    }

    private static Derivative slice(AtenCall call) {
        long dimGiven = (Long) call.constant("dim");
        Object start = call.constant("start");
        Object end = call.constant("end");
        long step = (Long) call.constant("step");
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            int dim = (int) (dimGiven < 0 ? dimGiven + shape.length : dimGiven);
            long size = shape[dim];
            long s = start == null ? 0 : clamp((Long) start, size);
            long e = Math.max(s, end == null ? size : clamp((Long) end, size));
            if (step == 1) {
                return new DTensor[] {Grads.pad(g[0], shape, dim, s, e)};
            }
            return new DTensor[] {aten("slice_backward", "T,[i],i,i,i,i", v(null, list(shape), (long) dim, s, e, step), g[0])};
        };
    }

    private static long clamp(long index, long size) {
        long i = index < 0 ? index + size : index;
        return Math.max(0, Math.min(size, i));
    }

    private static Derivative narrow(AtenCall call) {
        long dimGiven = (Long) call.constant("dim");
        Object startValue = call.constant("start");
        long length = (Long) call.constant("length");
        if (!(startValue instanceof Long)) {
            return null;
        }
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            int dim = (int) (dimGiven < 0 ? dimGiven + shape.length : dimGiven);
            long s = (Long) startValue < 0 ? (Long) startValue + shape[dim] : (Long) startValue;
            return new DTensor[] {Grads.pad(g[0], shape, dim, s, s + length)};
        };
    }

    /**
     * {@code constant_pad_nd(x, pad, value)} with pads of zero or more: the gradient is {@code g} cut back to {@code x}'s
     * extent on every padded dimension (cropping pads, below zero, have none here).
     */
    private static Derivative constantPad(AtenCall call) {
        long[] pad = (long[]) call.constant("pad");
        if (pad == null || Arrays.stream(pad).anyMatch(p -> p < 0)) {
            return null;
        }
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            DTensor grad = g[0];
            for (int k = 0; k < pad.length / 2; k++) {
                int dim = shape.length - 1 - k;
                if (pad[2 * k] != 0 || pad[2 * k + 1] != 0) {
                    grad = grad.narrow(dim, pad[2 * k], shape[dim]);
                }
            }
            return new DTensor[] {grad};
        };
    }

    private static Derivative select(AtenCall call) {
        long dimGiven = (Long) call.constant("dim");
        long index = (Long) call.constant("index");
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            int dim = (int) (dimGiven < 0 ? dimGiven + shape.length : dimGiven);
            long i = index < 0 ? index + shape[dim] : index;
            return new DTensor[] {Grads.pad(aten("unsqueeze", "T,i", v(null, (long) dim), g[0]), shape, dim, i, i + 1)};
        };
    }

    private static Derivative cat(AtenCall call) {
        long dimGiven = (Long) call.constant("dim");
        return (in, out, g, n) -> {
            DTensor[] grads = new DTensor[in.length];
            int ndim = out[0].ndim();
            int dim = (int) (dimGiven < 0 ? dimGiven + ndim : dimGiven);
            long offset = 0;
            for (int i = 0; i < in.length; i++) {
                long size = in[i].ndim() == 1 && in[i].size(0) == 0 && ndim > 1 ? 0 : in[i].size(dim);
                if (n[i]) {
                    grads[i] = g[0].narrow(dim, offset, size);
                }
                offset += size;
            }
            return grads;
        };
    }

    private static Derivative split(AtenCall call, boolean unbind) {
        long dimGiven = (Long) call.constant("dim");
        return (in, out, g, n) -> {
            int ndim = in[0].ndim();
            int dim = (int) (dimGiven < 0 ? dimGiven + ndim : dimGiven);
            List<DTensor> parts = new ArrayList<>();
            for (DTensor part : g) {
                parts.add(unbind ? aten("unsqueeze", "T,i", v(null, (long) dim), part) : part);
            }
            return new DTensor[] {parts.getFirst().runtime().cat(parts, dim)};
        };
    }

    /** The gradients of {@code torch.matmul(a, b)} (and of {@code mm}, {@code bmm}): 1-D operands as a row or a column. */
    static DTensor[] matmul(DTensor a, DTensor b, DTensor g, boolean[] n) {
        DTensor a2 = a.ndim() == 1 ? a.reshape(1, a.size(0)) : a;
        DTensor b2 = b.ndim() == 1 ? b.reshape(b.size(0), 1) : b;
        DTensor g2 = g;
        if (a.ndim() == 1 && b.ndim() == 1) {
            g2 = g.reshape(1, 1);
        } else if (a.ndim() == 1) {
            g2 = aten("unsqueeze", "T,i", v(null, (long) (g.ndim() - 1)), g);
        } else if (b.ndim() == 1) {
            g2 = aten("unsqueeze", "T,i", v(null, (long) g.ndim()), g);
        }
        DTensor ga = null;
        DTensor gb = null;
        if (n[0]) {
            ga = sumTo(g2.matmul(Grads.transposeLast(b2)), a2.shape());
            ga = a.ndim() == 1 ? ga.reshape(a.shape()) : ga;
        }
        if (n[1]) {
            gb = sumTo(Grads.transposeLast(a2).matmul(g2), b2.shape());
            gb = b.ndim() == 1 ? gb.reshape(b.shape()) : gb;
        }
        return new DTensor[] {ga, gb};
    }

    /** {@code linear(x, w, b) = x @ w.T + b}: the products over every leading dimension of {@code x} at once. */
    private static DTensor[] linear(DTensor[] in, DTensor g, boolean[] n) {
        DTensor x = in[0];
        DTensor w = in[1];
        DTensor[] out = new DTensor[in.length];
        if (w.ndim() == 1) {
            DTensor[] mm = matmul(x, w, g, n);
            out[0] = mm[0];
            out[1] = mm[1];
        } else {
            if (n[0]) {
                out[0] = g.matmul(w);
            }
            if (n[1]) {
                out[1] = weightGradient(g, x);
            }
        }
        if (in.length > 2 && n[2]) {
            out[2] = sumTo(g, in[2].shape());
        }
        return out;
    }

    /**
     * {@code g^T x} summed over every leading dimension, as one operator: {@code einsum("ABo,ABi->oi", g, x)} with the
     * leading dimensions spelled out (one upper-case label each), where flattening both, transposing and multiplying
     * took four. A leading dimension sharded on both gives a partial sum, as the product of the flattened ones does.
     */
    private static DTensor weightGradient(DTensor g, DTensor x) {
        StringBuilder leading = new StringBuilder();
        for (int d = 0; d < x.ndim() - 1; d++) {
            leading.append((char) ('A' + d));
        }
        String equation = leading + "o," + leading + "i->oi";
        return aten("einsum", "s,[T]", v(equation, Arrays.asList(null, null)), g, x);
    }

    /**
     * {@code layer_norm}: {@code xhat = (x - mean) * rstd} recomputed over the normalized dimensions, then
     * {@code gw = sum(g * xhat)}, {@code gb = sum(g)} and {@code gx = rstd * (gx' - mean(gx') - xhat * mean(gx' * xhat))}
     * with {@code gx' = g * w}. ATen's {@code native_layer_norm_backward} computes the same but has no meta kernel, which
     * the runtime needs to infer a distributed operator's outputs.
     */
    private static Derivative layerNorm(AtenCall call, List<String> names) {
        if (!call.overload().name().equals("layer_norm")) {
            return null;
        }
        long[] normalized = (long[]) call.constant("normalized_shape");
        double eps = ((Number) call.constant("eps")).doubleValue();
        boolean hasWeight = names.contains("weight");
        boolean hasBias = names.contains("bias");
        return (in, out, g, n) -> {
            DTensor x = in[0];
            int[] dims = lastDims(x.ndim(), normalized.length);
            DTensor centered = x.sub(x.mean(dims, true));
            DTensor rstd = aten("rsqrt", "T", v((Object) null), centered.mul(centered).mean(dims, true).add(eps));
            DTensor xhat = centered.mul(rstd);
            DTensor[] result = new DTensor[in.length];
            if (hasBias && n[names.indexOf("bias")]) {
                result[names.indexOf("bias")] = sumTo(g[0], in[names.indexOf("bias")].shape());
            }
            DTensor gxhat = g[0];
            if (hasWeight) {
                DTensor w = in[names.indexOf("weight")];
                if (n[names.indexOf("weight")]) {
                    result[names.indexOf("weight")] = sumTo(g[0].mul(xhat), w.shape());
                }
                gxhat = g[0].mul(w);
            }
            if (n[0]) {
                result[0] = rstd.mul(gxhat.sub(gxhat.mean(dims, true)).sub(xhat.mul(gxhat.mul(xhat).mean(dims, true))));
            }
            return result;
        };
    }

    /** The last {@code count} dimensions of a tensor of {@code ndim} dimensions. */
    private static int[] lastDims(int ndim, int count) {
        int[] dims = new int[count];
        for (int i = 0; i < count; i++) {
            dims[i] = ndim - count + i;
        }
        return dims;
    }

    /**
     * {@code rms_norm(x) = x * rsqrt(mean(x^2) + eps) * w} over the normalized dimensions. {@code rms_norm} does not
     * return {@code rstd = rsqrt(mean(x^2) + eps)}: a recorded call runs as {@code _fused_rms_norm}, which does
     * ({@link #savingRmsNorm}); otherwise {@code _fused_rms_norm} on the saved input gives it in one kernel (eps passed as
     * the forward got it, so a missing one takes the same default). A pass that records its own graph computes it from
     * operators with derivatives of their own. On CUDA, with a weight of the
     * input's dtype, ATen's {@code _fused_rms_norm_backward} then gives both gradients in one more kernel (libtorch has it
     * for CUDA, not for CPU); otherwise the formula: {@code gw = sum(g * xhat)},
     * {@code gx = rstd * (gx' - xhat * mean(gx' * xhat))} with {@code xhat = x * rstd} and {@code gx' = g * w}.
     */
    private static Derivative rmsNorm(AtenCall call, List<String> names) {
        return rmsNorm(call, names, null);
    }

    /**
     * The recorded forward of {@code rms_norm} as {@code _fused_rms_norm}, which gives the program the same output and
     * keeps {@code rstd} for the derivative, so that the backward does not compute it again; null (the plain call) where
     * the weight's dtype differs from the input's.
     */
    static SavedForward savingRmsNorm(AtenCall call, DTensor[] inputs) {
        List<String> names = call.inputNames();
        int weight = names.indexOf("weight");
        DTensor x = inputs[0];
        DTensor w = weight < 0 ? null : inputs[weight];
        if (x == null || (w != null && w.dtype() != x.dtype())) {
            return null;
        }
        List<Long> shape = list((long[]) call.constant("normalized_shape"));
        Object eps = call.constant("eps");
        String key = "T,[i]," + (w == null ? "n," : "T,") + (eps == null ? "n" : "f");
        List<DTensor> outs = w == null ? Grads.all("_fused_rms_norm", key, v(null, shape, null, eps), x)
            : Grads.all("_fused_rms_norm", key, v(null, shape, null, eps), x, w);
        DTensor rstd = outs.get(1);
        return new SavedForward(List.of(outs.getFirst()), rmsNorm(call, names, rstd), List.of(rstd));
    }

    /** {@link #rmsNorm(AtenCall, List)} with {@code rstd} as the forward kept it, or null where it is to be computed. */
    private static Derivative rmsNorm(AtenCall call, List<String> names, DTensor savedRstd) {
        List<Long> shape = list((long[]) call.constant("normalized_shape"));
        Object eps = call.constant("eps");
        String key = "T,[i],n," + (eps == null ? "n" : "f");
        int weight = names.indexOf("weight");
        return (in, out, g, n) -> {
            DTensor x = in[0];
            int[] dims = lastDims(x.ndim(), shape.size());
            // A pass that records its gradients' graph (create_graph) differentiates these operators in turn: the
            // fused ones have no derivative here, so it takes the formula from x alone.
            boolean graphed = GradMode.is_enabled();
            DTensor rstd = graphed
                ? aten("rsqrt", "T", v((Object) null), x.mul(x).mean(dims, true).add(eps instanceof Number e ? e.doubleValue()
                    : machineEpsilon(x.dtype())))
                : savedRstd != null ? savedRstd : Grads.all("_fused_rms_norm", key, v(null, shape, null, eps), x).get(1);
            DTensor[] result = new DTensor[in.length];
            DTensor w = weight < 0 ? null : in[weight];
            if (!graphed && w != null && x.mesh().kind() == DeviceKind.CUDA && w.dtype() == x.dtype()) {
                List<DTensor> grads = Grads.all("_fused_rms_norm_backward", "T,T,[i],T,T,[b]",
                    v(null, null, shape, null, null, BOTH), g[0], x, rstd, w);
                result[0] = n[0] ? grads.get(0) : null;
                result[weight] = n[weight] ? grads.get(1) : null;
                return result;
            }
            DTensor xhat = x.mul(rstd);
            DTensor gxhat = g[0];
            if (w != null) {
                if (n[weight]) {
                    result[weight] = sumTo(g[0].mul(xhat), w.shape());
                }
                gxhat = g[0].mul(w);
            }
            if (n[0]) {
                result[0] = rstd.mul(gxhat.sub(xhat.mul(gxhat.mul(xhat).mean(dims, true))));
            }
            return result;
        };
    }

    /** torch's default eps of RMS norm: the machine epsilon of the input's dtype. */
    private static double machineEpsilon(ScalarType dtype) {
        return switch (dtype) {
            case Double -> Math.ulp(1.0);
            case Half -> 0.0009765625;
            case BFloat16 -> 0.0078125;
            default -> Math.ulp(1.0f);
        };
    }

    /**
     * {@code embedding}: each index's row of {@code g} added into the weight's gradient ({@code index_add}), rows of
     * {@code padding_idx} left out. ATen's {@code embedding_dense_backward} computes the same but has no meta kernel.
     */
    private static Derivative embedding(AtenCall call) {
        long padding = (Long) call.constant("padding_idx");
        if (Boolean.TRUE.equals(call.constant("sparse")) || Boolean.TRUE.equals(call.constant("scale_grad_by_freq"))) {
            return null;
        }
        return (in, out, g, n) -> {
            DTensor w = in[0];
            DTensor indices = in[1];
            long dim = w.size(1);
            DTensor rows = g[0].reshape(-1, dim);
            DTensor flat = indices.reshape(-1);
            if (padding >= 0) {
                DTensor keep = aten("unsqueeze", "T,i", v(null, 1L), flat.ne(padding)).to(rows.dtype());
                rows = rows.mul(keep);
            }
            DTensor zeros = w.runtime().zeros(w.shape(), w.dtype(), w.mesh(), wholeOf(w));
            return new DTensor[] {aten("index_add", "T,i,T,T", v(null, 0L, null, null), zeros, flat, rows), null};
        };
    }

    private static org.dtorch.core.distributed.Placement[] wholeOf(DTensor t) {
        return t.placements().stream().map(p -> p.isPartial() ? org.dtorch.core.distributed.Placement.replicate() : p)
            .toArray(org.dtorch.core.distributed.Placement[]::new);
    }

    /**
     * {@code mse_loss}: {@code 2 (x - t) g}, divided by the element count for the mean. ATen's {@code mse_loss_backward}
     * computes the same but has no meta kernel.
     */
    private static Derivative mseLoss(AtenCall call) {
        long reduction = (Long) call.constant("reduction");
        return (in, out, g, n) -> {
            DTensor diff = in[0].sub(in[1]);
            long numel = 1;
            for (long s : in[0].shape()) {
                numel *= s;
            }
            DTensor gx = diff.mul(g[0]).mul(reduction == 1 ? 2.0 / numel : 2.0);
            return new DTensor[] {n[0] ? gx : null, n[1] ? gx.neg() : null};
        };
    }

    private static Derivative where() {
        return (in, out, g, n) -> {
            DTensor cond = in[0];
            DTensor zero = g[0].mul(0.0);
            return new DTensor[] {null,
                n[1] ? sumTo(g[0].runtime().where(cond, g[0], zero), in[1].shape()) : null,
                n[2] ? sumTo(g[0].runtime().where(cond, zero, g[0]), in[2].shape()) : null};
        };
    }
}
