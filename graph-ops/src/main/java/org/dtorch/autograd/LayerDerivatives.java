package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.list;
import static org.dtorch.autograd.Grads.sumTo;
import static org.dtorch.autograd.Grads.v;

import java.util.Arrays;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of the layer operators: the products with an added term ({@code addmm}, {@code addmv},
 * {@code baddbmm}), {@code einsum}, convolutions, 1-D and 2-D pooling, {@code group_norm} and {@code batch_norm}.
 *
 * <ul>
 *   <li>{@code addmm(s, a, b, beta, alpha)}: {@code beta * g} summed to {@code s}'s shape, and the product's gradients
 *       scaled by {@code alpha};</li>
 *   <li>{@code einsum}: each operand's gradient is an {@code einsum} of the output's gradient with the other operands,
 *       to the operand's labels ({@link Einsum});</li>
 *   <li>convolutions: libtorch's {@code convolution_backward} has no meta kernel, which a distributed operator needs to
 *       infer its outputs, so the gradients are the convolutions that operator runs itself: the input's is the transposed
 *       convolution of {@code g} with the weight (an output padding restores the input's size), the weight's is the
 *       convolution of the input with {@code g}, batch and channels swapped (stride and dilation trade places; a group
 *       stays a group), cut to the kernel's size, the bias's is {@code g} summed but over channels. A transposed
 *       convolution's are the same with the roles exchanged: the input's is a convolution, the weight's correlates
 *       {@code g} with the input;</li>
 *   <li>pooling: ATen's {@code max_pool2d_with_indices_backward} (the indices recomputed by
 *       {@code max_pool2d_with_indices}), {@code avg_pool2d_backward}, {@code avg_pool3d_backward} and
 *       {@code adaptive_max_pool2d_backward}, which keep shards of the batch and channel dimensions; the 1-D poolings
 *       through the same operators over a height of one; adaptive average pooling as products
 *       ({@link AdaptiveAveragePooling});</li>
 *   <li>{@code group_norm}: {@code native_group_norm_backward} has no meta kernel either, so its formula over each
 *       sample's groups: {@code gx = rstd * (gx' - mean(gx') - xhat * mean(gx' * xhat))} with {@code gx' = g * w}.</li>
 * </ul>
 *
 * <p>Thread-safe: stateless.
 */
final class LayerDerivatives {
    private LayerDerivatives() {
    }

    /** The derivative of {@code call} on {@code inputs}, or null when this class has none for it. */
    static Derivative of(AtenCall call, List<String> names, DTensor[] inputs) {
        return switch (call.overload().name()) {
            case "addmm", "addmv", "baddbmm" -> call.inputCount() == 3 ? addProduct(call) : null;
            case "einsum" -> Einsum.of((String) call.constant("equation"), inputs);
            case "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution" ->
                convolution(call, names, inputs);
            case "max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices" -> maxPool(call);
            case "avg_pool1d", "avg_pool2d", "avg_pool3d" -> avgPool(call);
            case "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d" ->
                AdaptiveAveragePooling.derivative(poolDims(call));
            case "adaptive_max_pool1d", "adaptive_max_pool2d" -> adaptiveMaxPool(call);
            case "group_norm" -> groupNorm(call, names);
            case "batch_norm" -> batchNorm(call, names);
            default -> null;
        };
    }

    private static double number(Object value, double otherwise) {
        return value instanceof Number x ? x.doubleValue() : otherwise;
    }

    private static Derivative addProduct(AtenCall call) {
        double beta = number(call.constant("beta"), 1.0);
        double alpha = number(call.constant("alpha"), 1.0);
        return (in, out, g, n) -> {
            DTensor[] result = new DTensor[3];
            if (n[0]) {
                result[0] = sumTo(beta == 1.0 ? g[0] : g[0].mul(beta), in[0].shape());
            }
            if (n[1] || n[2]) {
                DTensor[] product = AtenDerivatives.matmul(in[1], in[2], alpha == 1.0 ? g[0] : g[0].mul(alpha), new boolean[] {n[1], n[2]});
                result[1] = product[0];
                result[2] = product[1];
            }
            return result;
        };
    }

    // Convolutions ------------------------------------------------------------------------------------------------

    /** The parameters of a convolution, one value per spatial dimension. */
    private record Conv(long[] stride, long[] padding, long[] dilation, long groups, boolean transposed) {
    }

    private static Derivative convolution(AtenCall call, List<String> names, DTensor[] inputs) {
        DTensor weight = inputs[names.indexOf("weight")];
        int spatial = weight.ndim() - 2;
        long[] kernel = new long[spatial];
        for (int i = 0; i < spatial; i++) {
            kernel[i] = weight.size(i + 2);
        }
        long[] stride = ConvolutionParams.perDim(call.constant("stride"), spatial, 1);
        long[] dilation = ConvolutionParams.perDim(call.constant("dilation"), spatial, 1);
        long[] padding = ConvolutionParams.padding(call.constant("padding"), kernel, dilation);
        if (stride == null || dilation == null || padding == null) {
            return null;
        }
        Object groupsValue = call.constant("groups");
        Conv conv = new Conv(stride, padding, dilation, groupsValue instanceof Number x ? x.longValue() : 1, ConvolutionParams.transposed(call));
        int x = names.indexOf("input");
        int w = names.indexOf("weight");
        int b = names.indexOf("bias");
        return (in, out, g, n) -> {
            DTensor[] result = new DTensor[in.length];
            boolean batched = in[x].ndim() == in[w].ndim();
            DTensor input = batched ? in[x] : aten("unsqueeze", "T,i", v(null, 0L), in[x]);
            DTensor gy = batched ? g[0] : aten("unsqueeze", "T,i", v(null, 0L), g[0]);
            if (n[x]) {
                DTensor gx = convInputGrad(gy, in[w], input.shape(), conv);
                result[x] = batched ? gx : gx.reshape(in[x].shape());
            }
            if (n[w]) {
                result[w] = conv.transposed() ? correlate(gy, input, in[w].shape(), conv) : correlate(input, gy, in[w].shape(), conv);
            }
            if (b >= 0 && n[b]) {
                result[b] = gy.sum(allButChannels(gy.ndim()), false);
            }
            return result;
        };
    }

    private static DTensor convolve(DTensor input, DTensor weight, long[] stride, long[] padding, long[] dilation, boolean transposed,
                                    long[] outputPadding, long groups) {
        return aten("convolution", "T,T,n,[i],[i],[i],b,[i],i",
            v(null, null, null, list(stride), list(padding), list(dilation), transposed, list(outputPadding), groups), input, weight);
    }

    /**
     * The input's gradient. Of a convolution: the transposed convolution of {@code g} with the weight, with the output
     * padding that restores the input's spatial sizes. Of a transposed convolution: the convolution of {@code g} with
     * the weight, cut to the input's sizes (an output padding of the forward adds positions no input reached).
     */
    private static DTensor convInputGrad(DTensor g, DTensor weight, long[] inputShape, Conv c) {
        int spatial = inputShape.length - 2;
        if (c.transposed()) {
            DTensor r = convolve(g, weight, c.stride(), c.padding(), c.dilation(), false, new long[spatial], c.groups());
            return cut(r, inputShape);
        }
        long[] outputPadding = new long[spatial];
        for (int i = 0; i < spatial; i++) {
            long kernel = weight.size(i + 2);
            outputPadding[i] = inputShape[i + 2] + 2 * c.padding()[i] - c.dilation()[i] * (kernel - 1) - 1 - (g.size(i + 2) - 1) * c.stride()[i];
        }
        return convolve(g, weight, c.stride(), c.padding(), c.dilation(), true, outputPadding, c.groups());
    }

    /** {@code t} cut at the end of each spatial dimension to the sizes of {@code shape}. */
    private static DTensor cut(DTensor t, long[] shape) {
        DTensor r = t;
        for (int i = 2; i < shape.length; i++) {
            if (r.size(i) != shape[i]) {
                r = r.narrow(i, 0, shape[i]);
            }
        }
        return r;
    }

    /**
     * The weight's gradient, a correlation over the batch of a signal {@code a} with a kernel {@code b}, each
     * {@code (N, C, *)}: {@code gw[j, i, k] = sum over n, p of b[n, j, p] * a[n, i, p * stride + k * dilation]}, a
     * convolution of {@code a} (channels as the batch, each group's samples as channels) with {@code b} (its channels as
     * output channels, its samples as input channels) at stride {@code dilation} and dilation {@code stride}, cut to the
     * kernel's size. A convolution's weight correlates the input with {@code g}; a transposed convolution's, {@code g}
     * with the input.
     */
    private static DTensor correlate(DTensor a, DTensor b, long[] weightShape, Conv c) {
        long batch = a.size(0);
        long aChannels = a.size(1);
        long bChannels = b.size(1);
        long groups = c.groups();
        int spatial = weightShape.length - 2;
        DTensor at;
        DTensor bt;
        if (groups == 1) {
            at = a.transpose(0, 1);
            bt = b.transpose(0, 1);
        } else {
            at = a.reshape(concat(new long[] {batch, groups, aChannels / groups}, a.shape(), 2))
                .permute(order(new int[] {2, 1, 0}, spatial, 3))
                .reshape(concat(new long[] {aChannels / groups, groups * batch}, a.shape(), 2));
            bt = b.reshape(concat(new long[] {batch, groups, bChannels / groups}, b.shape(), 2))
                .permute(order(new int[] {1, 2, 0}, spatial, 3))
                .reshape(concat(new long[] {bChannels, batch}, b.shape(), 2));
        }
        DTensor r = convolve(at, bt, c.dilation(), c.padding(), c.stride(), false, new long[spatial], groups).transpose(0, 1);
        return cut(r, weightShape);
    }

    /** {@code head} followed by {@code shape} from index {@code from} on. */
    private static long[] concat(long[] head, long[] shape, int from) {
        long[] out = new long[head.length + shape.length - from];
        System.arraycopy(head, 0, out, 0, head.length);
        System.arraycopy(shape, from, out, head.length, shape.length - from);
        return out;
    }

    /** {@code head} followed by the dimensions {@code from .. from + count - 1}: a permutation that keeps the spatial ones. */
    private static int[] order(int[] head, int count, int from) {
        int[] out = new int[head.length + count];
        System.arraycopy(head, 0, out, 0, head.length);
        for (int i = 0; i < count; i++) {
            out[head.length + i] = from + i;
        }
        return out;
    }

    // Pooling ---------------------------------------------------------------------------------------------------------

    /**
     * A pooling call's per-dimension parameters, a 1-D pooling's as 2-D ones: the 2-D pooling over a height of one
     * (kernel, stride and dilation one, no padding there), so that ATen's 2-D backward operators serve both.
     */
    private record Pool2d(long[] kernel, long[] stride, long[] padding, long[] dilation, boolean lifted) {
        static Pool2d of(AtenCall call, int spatial) {
            long[] kernel = ConvolutionParams.perDim(call.constant("kernel_size"), spatial, 1);
            long[] stride = ConvolutionParams.perDim(call.constant("stride"), spatial, 0);
            long[] padding = ConvolutionParams.perDim(call.constant("padding"), spatial, 0);
            long[] dilation = ConvolutionParams.perDim(call.constant("dilation"), spatial, 1);
            if (kernel == null || stride == null || padding == null || dilation == null) {
                return null;
            }
            if (stride[0] == 0) {
                stride = kernel;
            }
            boolean lifted = spatial == 1;
            return lifted ? new Pool2d(new long[] {1, kernel[0]}, new long[] {1, stride[0]}, new long[] {0, padding[0]},
                new long[] {1, dilation[0]}, true) : new Pool2d(kernel, stride, padding, dilation, false);
        }

        /** {@code t} with the height of one a lifted 1-D pooling works on. */
        DTensor lift(DTensor t) {
            return lifted ? aten("unsqueeze", "T,i", v(null, (long) (t.ndim() - 1)), t) : t;
        }
    }

    /** The number of spatial dimensions of a pooling call: its name's {@code 1d}, {@code 2d} or {@code 3d}. */
    private static int poolDims(AtenCall call) {
        String name = call.overload().name();
        return name.contains("1d") ? 1 : name.contains("3d") ? 3 : 2;
    }

    private static Derivative maxPool(AtenCall call) {
        Pool2d p = Pool2d.of(call, poolDims(call));
        boolean ceil = Boolean.TRUE.equals(call.constant("ceil_mode"));
        if (p == null) {
            return null;
        }
        Object[] values = v(null, list(p.kernel()), list(p.stride()), list(p.padding()), list(p.dilation()), ceil);
        Object[] backward = v(null, null, list(p.kernel()), list(p.stride()), list(p.padding()), list(p.dilation()), ceil, null);
        return (in, out, g, n) -> {
            DTensor x = p.lift(in[0]);
            DTensor indices = Grads.all("max_pool2d_with_indices", "T,[i],[i],[i],[i],b", values, x).get(1);
            DTensor gx = aten("max_pool2d_with_indices_backward", "T,T,[i],[i],[i],[i],b,T", backward, p.lift(g[0]), x, indices);
            return new DTensor[] {p.lifted() ? gx.reshape(in[0].shape()) : gx};
        };
    }

    private static Derivative avgPool(AtenCall call) {
        Pool2d p = Pool2d.of(call, poolDims(call));
        boolean ceil = Boolean.TRUE.equals(call.constant("ceil_mode"));
        boolean countPad = !Boolean.FALSE.equals(call.constant("count_include_pad"));
        Object divisor = call.constant("divisor_override");
        if (p == null) {
            return null;
        }
        String key = "T,T,[i],[i],[i],b,b," + (divisor == null ? "n" : "i");
        Object[] values = v(null, null, list(p.kernel()), list(p.stride()), list(p.padding()), ceil, countPad, divisor);
        String backward = p.kernel().length == 3 ? "avg_pool3d_backward" : "avg_pool2d_backward";
        return (in, out, g, n) -> {
            DTensor gx = aten(backward, key, values, p.lift(g[0]), p.lift(in[0]));
            return new DTensor[] {p.lifted() ? gx.reshape(in[0].shape()) : gx};
        };
    }

    /**
     * {@code adaptive_max_pool1d}/{@code 2d}: ATen's {@code adaptive_max_pool2d_backward} with the indices recomputed, a
     * 1-D pooling over a height of one (its output a height of one too).
     */
    private static Derivative adaptiveMaxPool(AtenCall call) {
        boolean lifted = call.overload().name().contains("1d");
        long[] size = ConvolutionParams.perDim(call.constant("output_size"), lifted ? 1 : 2, 1);
        if (size == null) {
            return null;
        }
        List<Long> outputSize = lifted ? list(1, size[0]) : list(size);
        return (in, out, g, n) -> {
            DTensor x = lifted ? aten("unsqueeze", "T,i", v(null, (long) (in[0].ndim() - 1)), in[0]) : in[0];
            DTensor gy = lifted ? aten("unsqueeze", "T,i", v(null, (long) (g[0].ndim() - 1)), g[0]) : g[0];
            DTensor indices = Grads.all("adaptive_max_pool2d", "T,[i]", v(null, outputSize), x).get(1);
            DTensor gx = aten("adaptive_max_pool2d_backward", "T,T,T", v(null, null, null), gy, x, indices);
            return new DTensor[] {lifted ? gx.reshape(in[0].shape()) : gx};
        };
    }

    // Group and batch norm -----------------------------------------------------------------------------------------

    /** Every dimension of an {@code (N, C, *)} tensor but the channels'. */
    private static int[] allButChannels(int ndim) {
        int[] dims = new int[ndim - 1];
        for (int i = 0; i < dims.length; i++) {
            dims[i] = i == 0 ? 0 : i + 1;
        }
        return dims;
    }

    /** The shape {@code (1, C, 1, ...)} that a per-channel tensor takes to broadcast against an {@code (N, C, *)} one. */
    private static long[] channelShape(long[] shape) {
        long[] channels = new long[shape.length];
        Arrays.fill(channels, 1);
        channels[1] = shape[1];
        return channels;
    }

    /**
     * {@code batch_norm}: with batch statistics (training, or no running statistics) the normalization's formula over
     * each channel's batch and spatial elements, {@code gx = rstd * (gx' - mean(gx') - xhat * mean(gx' * xhat))} with
     * {@code gx' = g * w}; with running statistics (evaluation) the statistics are constants, so {@code gx = gx' * rstd}.
     * ATen's {@code native_batch_norm_backward} has no meta kernel.
     */
    private static Derivative batchNorm(AtenCall call, List<String> names) {
        boolean training = Boolean.TRUE.equals(call.constant("training"));
        double eps = number(call.constant("eps"), 1e-5);
        int wi = names.indexOf("weight");
        int bi = names.indexOf("bias");
        int mi = names.indexOf("running_mean");
        int vi = names.indexOf("running_var");
        boolean running = !training && mi >= 0 && vi >= 0;
        return (in, out, g, n) -> {
            DTensor x = in[0];
            long[] shape = x.shape();
            int[] dims = allButChannels(shape.length);
            long[] channels = channelShape(shape);
            DTensor centered = x.sub(running ? in[mi].reshape(channels) : x.mean(dims, true));
            DTensor variance = running ? in[vi].reshape(channels) : centered.mul(centered).mean(dims, true);
            DTensor rstd = aten("rsqrt", "T", v((Object) null), variance.add(eps));
            DTensor xhat = centered.mul(rstd);
            DTensor[] result = new DTensor[in.length];
            if (bi >= 0 && n[bi]) {
                result[bi] = g[0].sum(dims, false);
            }
            DTensor gxhat = g[0];
            if (wi >= 0) {
                if (n[wi]) {
                    result[wi] = g[0].mul(xhat).sum(dims, false);
                }
                gxhat = g[0].mul(in[wi].reshape(channels));
            }
            if (n[0]) {
                result[0] = running ? gxhat.mul(rstd)
                    : rstd.mul(gxhat.sub(gxhat.mean(dims, true)).sub(xhat.mul(gxhat.mul(xhat).mean(dims, true))));
            }
            return result;
        };
    }

    private static Derivative groupNorm(AtenCall call, List<String> names) {
        long groups = (Long) call.constant("num_groups");
        double eps = number(call.constant("eps"), 1e-5);
        int wi = names.indexOf("weight");
        int bi = names.indexOf("bias");
        return (in, out, g, n) -> {
            DTensor x = in[0];
            long[] shape = x.shape();
            long batch = shape[0];
            long perGroup = 1;
            for (int d = 1; d < shape.length; d++) {
                perGroup *= shape[d];
            }
            perGroup /= groups;
            int[] last = {2};
            DTensor xg = x.reshape(batch, groups, perGroup);
            DTensor centered = xg.sub(xg.mean(last, true));
            DTensor rstd = aten("rsqrt", "T", v((Object) null), centered.mul(centered).mean(last, true).add(eps));
            DTensor xhat = centered.mul(rstd);
            int[] allButChannels = allButChannels(shape.length);
            DTensor[] result = new DTensor[in.length];
            if (bi >= 0 && n[bi]) {
                result[bi] = g[0].sum(allButChannels, false);
            }
            DTensor gxhat = g[0];
            if (wi >= 0) {
                if (n[wi]) {
                    result[wi] = g[0].mul(xhat.reshape(shape)).sum(allButChannels, false);
                }
                gxhat = g[0].mul(in[wi].reshape(channelShape(shape)));
            }
            if (n[0]) {
                DTensor gg = gxhat.reshape(batch, groups, perGroup);
                DTensor gx = rstd.mul(gg.sub(gg.mean(last, true)).sub(xhat.mul(gg.mul(xhat).mean(last, true))));
                result[0] = gx.reshape(shape);
            }
            return result;
        };
    }
}
