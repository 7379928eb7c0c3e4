package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * Convolutions ({@code conv1d}, {@code conv2d}, {@code conv3d}, their {@code padding="same"/"valid"} overloads,
 * {@code conv_transpose*}, {@code convolution}, {@code _convolution}): {@code input} of shape {@code (N, C_in, *spatial)}
 * or unbatched {@code (C_in, *spatial)}, {@code weight} {@code (C_out, C_in / groups, *kernel)} (transposed:
 * {@code (C_in, C_out / groups, *kernel)}), optional {@code bias} {@code (C_out)}. Per mesh dimension, the first rule
 * that the inputs' placements select:
 * <ul>
 *   <li>batch: input {@code S(0)} (batched) stays; weight and bias {@code R}; the output is {@code S(0)};</li>
 *   <li>height (2-D, where the output height is the input's): input {@code S(2)} on one mesh dimension stays, weight and
 *       bias {@code R}; each device exchanges halo rows with its neighbours ({@link HaloConvolution}); the output is
 *       {@code S(2)};</li>
 *   <li>output channels ({@code groups == 1}): weight sharded on its output-channel dimension stays, bias {@code S(0)},
 *       input {@code R}; the output is sharded on its channel dimension;</li>
 *   <li>input channels ({@code groups == 1}, no bias): input sharded on its channel dimension, or weight on its
 *       input-channel dimension, selects both sharded so; each device sums over its channels only, so the output is
 *       {@code P(sum)}. With a bias the sum would count the bias once per device, so that case gathers instead;</li>
 *   <li>partial sums (no bias): a {@code P(sum)} input with an {@code R} weight, or the reverse, stays: a convolution
 *       without bias is linear in each of them;</li>
 *   <li>otherwise everything {@code R}: other spatial shards are gathered.</li>
 * </ul>
 * libtorch has no meta kernel for convolutions ({@code convolution_overrideable} on the meta device), so the output
 * shape is the convolution's formula ({@link #outputShape}), which checks what libtorch would; the dtype comes from a
 * probe on tensors of one element per group.
 *
 * <p>Stateless. Thread-safe.
 */
final class ConvolutionStrategy implements ShardingStrategy {
    static final ConvolutionStrategy INSTANCE = new ConvolutionStrategy();

    /** The operators of the family, by name. */
    static final Set<String> NAMES = Set.of("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "convolution", "_convolution");

    private ConvolutionStrategy() {
    }

    @Override
    public String family() {
        return "convolution";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R for all inputs; input S(0) (batch) with weight and bias R; input S(2) (height, 2-D, stride 1, "
            + "padding = dilation * (kernel - 1) / 2 in height, on one mesh dimension) with weight and bias R; weight S on its output-channel "
            + "dimension with bias S(0) and input R (groups=1); input S on its channel dimension with weight S on its input-channel "
            + "dimension, without bias (groups=1; gives P(sum)); input or weight P(sum) with the other R, without bias";
    }

    /** The parts of one convolution call that the placements depend on. */
    private record Conv(TensorMeta input, TensorMeta weight, TensorMeta bias, int inputIndex, int weightIndex, int biasIndex,
                        boolean transposed, long groups) {
        int spatial() {
            return weight.ndim() - 2;
        }

        boolean batched() {
            return input.ndim() == weight.ndim();
        }

        /** The input's (and output's) channel dimension. */
        int channelDim() {
            return batched() ? 1 : 0;
        }

        int weightOutDim() {
            return transposed ? 1 : 0;
        }

        int weightInDim() {
            return transposed ? 0 : 1;
        }
    }

    private static Conv conv(AtenCall call, List<TensorMeta> inputs) {
        List<String> names = call.inputNames();
        int x = names.indexOf("input");
        int w = names.indexOf("weight");
        int b = names.indexOf("bias");
        Object groups = call.constant("groups");
        return new Conv(inputs.get(x), inputs.get(w), b < 0 ? null : inputs.get(b), x, w, b, transposed(call),
            groups == null ? 1 : ((Number) groups).longValue());
    }

    /** True for a transposed convolution: by its name, or by {@code convolution}'s {@code transposed} flag. */
    static boolean transposed(AtenCall call) {
        return call.overload().name().startsWith("conv_transpose") || Boolean.TRUE.equals(call.constant("transposed"));
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        Conv c = conv(call, inputs);
        int meshDims = inputs.getFirst().placements().size();
        List<List<Placement>> in = ShardingStrategy.replicatedInputs(inputs.size(), meshDims);
        List<Placement> out = new ArrayList<>();
        HaloConvolution.Plan halo = HaloConvolution.plan(call, inputs);
        for (int m = 0; m < meshDims; m++) {
            Placement px = c.input().placement(m);
            Placement pw = c.weight().placement(m);
            int dx = Rules.shardDim(px);
            int dw = Rules.shardDim(pw);
            boolean noBias = c.bias() == null;
            Placement output = Placement.replicate();
            if (c.batched() && dx == 0) {
                in.get(c.inputIndex()).set(m, px);
                output = px;
            } else if (halo != null && halo.meshDim() == m) {
                in.get(c.inputIndex()).set(m, px);
                output = px;
            } else if (c.groups() == 1 && dw == c.weightOutDim()) {
                in.get(c.weightIndex()).set(m, pw);
                if (!noBias) {
                    in.get(c.biasIndex()).set(m, Placement.shard(0));
                }
                output = Placement.shard(c.channelDim());
            } else if (c.groups() == 1 && noBias && (dx == c.channelDim() || dw == c.weightInDim())) {
                in.get(c.inputIndex()).set(m, Placement.shard(c.channelDim()));
                in.get(c.weightIndex()).set(m, Placement.shard(c.weightInDim()));
                output = Placement.partial();
            } else if (noBias && (Rules.isPartialSum(px) && pw.isReplicate() || Rules.isPartialSum(pw) && px.isReplicate())) {
                in.get(c.inputIndex()).set(m, px);
                in.get(c.weightIndex()).set(m, pw);
                output = Placement.partial();
            }
            out.add(output);
        }
        return new Decision(in, Collections.nCopies(outputs, out));
    }

    /**
     * A height-sharded input that a halo serves ({@link HaloConvolution}) runs the halo exchange, then the convolution. A
     * device whose share of the contracted input channels is empty contributes zeros to the partial sum (libtorch gives
     * a convolution of no input channel no output channel either).
     */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        List<TensorMeta> inputs = op.inputs().stream().map(Operand::meta).toList();
        Conv c = conv(call, inputs);
        long[] localInput = c.input().layout().localShape(deviceId);
        TensorMeta output = op.outputs().getFirst().meta();
        if (localInput[c.channelDim()] == 0 && c.input().size(c.channelDim()) > 0 && output.placements().stream().anyMatch(Placement::isPartial)) {
            long[] shape = output.layout().localShape(deviceId);
            ScalarType dtype = output.dtype();
            return (ctx, local) -> {
                try (TensorOptions like = local.get(c.inputIndex()).options(); ScalarTypeOptional type = new ScalarTypeOptional(dtype);
                     TensorOptions options = like.dtype(type)) {
                    return List.of(torch.zeros(shape, options));
                }
            };
        }
        HaloConvolution.Plan halo = HaloConvolution.plan(call, inputs);
        return halo == null ? null : HaloConvolution.kernel(call, inputs, halo);
    }

    @Override
    public boolean communicates(AtenCall call) {
        return HaloConvolution.mayExchange(call);
    }

    /**
     * The convolution's output shape: {@code floor((L + 2p - d(k - 1) - 1) / s) + 1} per spatial dimension, or
     * {@code (L - 1)s - 2p + d(k - 1) + output_padding + 1} transposed; {@code padding="same"} keeps {@code L}. Checks
     * the shapes as libtorch does (dimensions, channels, bias, a kernel that fits), naming the operator.
     */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        Conv c = conv(call, inputs);
        String op = call.qualifiedName();
        int k = c.spatial();
        TensorMeta x = c.input();
        TensorMeta w = c.weight();
        if (k < 1 || x.ndim() != w.ndim() && x.ndim() != w.ndim() - 1) {
            throw new IllegalArgumentException(op + ": weight " + Arrays.toString(w.shape()) + " does not fit input "
                + Arrays.toString(x.shape()) + " (expected an input of " + (w.ndim() - 1) + " or " + w.ndim() + " dimensions)");
        }
        long inChannels = c.transposed() ? w.size(0) : w.size(1) * c.groups();
        long outChannels = c.transposed() ? w.size(1) * c.groups() : w.size(0);
        if (x.size(c.channelDim()) != inChannels || c.groups() < 1 || w.size(0) % c.groups() != 0) {
            throw new IllegalArgumentException(op + ": input " + Arrays.toString(x.shape()) + " has " + x.size(c.channelDim())
                + " channels where weight " + Arrays.toString(w.shape()) + " with groups=" + c.groups() + " expects " + inChannels);
        }
        if (c.bias() != null && (c.bias().ndim() != 1 || c.bias().size(0) != outChannels)) {
            throw new IllegalArgumentException(op + ": bias " + Arrays.toString(c.bias().shape()) + " should have shape [" + outChannels + "]");
        }
        long[] shape = x.shape().clone();
        shape[c.channelDim()] = outChannels;
        Object padding = call.constant("padding");
        for (int i = 0; i < k; i++) {
            int d = c.channelDim() + 1 + i;
            long length = x.size(d);
            long kernel = w.size(2 + i);
            long stride = at(call, "stride", i, 1);
            long dilation = at(call, "dilation", i, 1);
            long span = dilation * (kernel - 1);
            if ("same".equals(padding)) {
                shape[d] = length;
            } else if (c.transposed()) {
                shape[d] = (length - 1) * stride - 2 * at(call, "padding", i, 0) + span + at(call, "output_padding", i, 0) + 1;
            } else {
                long padded = length + 2 * at(call, "padding", i, 0); // "valid" is no padding
                shape[d] = padded < span + 1 ? 0 : (padded - span - 1) / stride + 1;
            }
            if (shape[d] < 1) {
                throw new IllegalArgumentException(op + ": kernel " + Arrays.toString(w.shape()) + " (dilated) is larger than input "
                    + Arrays.toString(x.shape()) + " with its padding");
            }
        }
        return shape;
    }

    /**
     * Element {@code i} of int-list parameter {@code name} (a one-element list holds for every dimension), or
     * {@code absent} when the list is missing or empty (pooling's {@code stride=[]}). Pooling's shapes use it too.
     */
    static long at(AtenCall call, String name, int i, long absent) {
        Object value = call.constant(name);
        if (!(value instanceof long[] list) || list.length == 0) {
            return absent;
        }
        return list[list.length == 1 ? 0 : i];
    }

    /**
     * One element per dimension, except {@code groups} channels, so that grouped convolutions accept the probe, and for
     * transposed ones {@code 1 + 2 * padding} input elements per spatial dimension, so that the output is not empty.
     */
    @Override
    public long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        Conv c = conv(call, inputs);
        long[][] shapes = ShardingStrategy.super.probeShapes(call, inputs);
        shapes[c.inputIndex()][c.channelDim()] = c.groups();
        for (int i = 0; c.transposed() && i < c.spatial(); i++) {
            shapes[c.inputIndex()][c.channelDim() + 1 + i] = 1 + 2 * at(call, "padding", i, 0);
        }
        shapes[c.weightIndex()][0] = c.groups();
        if (c.biasIndex() >= 0) {
            shapes[c.biasIndex()][0] = c.groups();
        }
        return shapes;
    }
}
