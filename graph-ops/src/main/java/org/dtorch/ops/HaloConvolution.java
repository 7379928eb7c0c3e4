package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.group.HaloExchange;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;

/**
 * A 2-D convolution of an input sharded on its height (dim 2 of {@code NCHW}, on one mesh dimension) that keeps the
 * shard: each device receives {@code h} rows from each neighbour along that mesh dimension ({@link HaloExchange}) and
 * convolves its haloed rows with no padding in height, which gives exactly its balanced share of the output rows
 * (TeleFuser's spatial convolution). It applies where the output height equals the input height, so that the output's
 * shares are the input's: stride 1 in height and a padding {@code p} with {@code 2p = dilation * (kernel - 1)} (odd
 * kernels with {@code p = (k - 1) / 2}, {@code padding="same"} where it pads alike on both sides), the halo being
 * {@code h = p}; its rows come from whichever devices hold them, past a neighbour whose share is shorter than the halo
 * or empty. Width, groups, bias and the width's stride, padding and dilation are the device's own and pass unchanged.
 * Every other case is left to the convolution's other rules, which gather. A device whose share is empty (a height
 * shorter than the devices) convolves its halo rows and one zero row more, and keeps no row of the result: libtorch
 * refuses a convolution whose output has no row, and this way the empty output still has the output's dtype and width.
 * A device whose weight shard has no output channel likewise convolves with one zero channel and keeps none.
 *
 * <pre>
 *   device r:  [ h rows of r - 1 | H_r rows | h rows of r + 1 ]  --conv, padding (0, p_w)-->  [ H_r rows ]
 * </pre>
 *
 * <p>Stateless; the kernels it makes are not thread-safe (one device thread each).
 */
final class HaloConvolution {
    /** The tensor-input order of every convolution overload: input, weight, then bias where given. */
    private static final int INPUT = 0;
    private static final int WEIGHT = 1;

    /** Where the halo runs: mesh dimension {@code meshDim} shards the input's {@code height} rows; {@code halo} rows a side. */
    record Plan(int meshDim, long height, int halo) {
    }

    private HaloConvolution() {
    }

    /**
     * True when {@code call} is a convolution a halo could serve, whatever its inputs: a non-transposed {@code conv2d},
     * {@code convolution} or {@code _convolution} (its kernel may then communicate).
     */
    static boolean mayExchange(AtenCall call) {
        String name = call.overload().name();
        return (name.equals("conv2d") || name.equals("convolution") || name.equals("_convolution")) && !ConvolutionStrategy.transposed(call);
    }

    /**
     * The halo plan of {@code call} on {@code inputs} as they are placed, or null where the halo does not apply: not a
     * batched 2-D non-transposed convolution, the input's height sharded on no or several mesh dimensions, an output
     * height other than the input's, or an asymmetric {@code "same"} padding.
     */
    static Plan plan(AtenCall call, List<TensorMeta> inputs) {
        if (!mayExchange(call) || inputs.size() < 2) {
            return null;
        }
        TensorMeta x = inputs.get(INPUT);
        TensorMeta w = inputs.get(WEIGHT);
        if (x.ndim() != 4 || w.ndim() != 4) {
            return null;
        }
        int meshDim = -1;
        for (int m = 0; m < x.placements().size(); m++) {
            if (Rules.shardDim(x.placement(m)) == 2) {
                if (meshDim >= 0) {
                    return null; // nested height shards: a device's rows are not one balanced share of the height
                }
                meshDim = m;
            }
        }
        long[] padding = padding(call, w);
        if (meshDim < 0 || padding == null || ConvolutionStrategy.at(call, "stride", 0, 1) != 1
            || 2 * padding[0] != ConvolutionStrategy.at(call, "dilation", 0, 1) * (w.size(2) - 1)) {
            return null;
        }
        return new Plan(meshDim, x.size(2), Math.toIntExact(padding[0]));
    }

    /** The padding {@code (p_h, p_w)} of {@code call}; null for a {@code "same"} padding that is not alike on both sides. */
    private static long[] padding(AtenCall call, TensorMeta weight) {
        Object padding = call.constant("padding");
        if ("valid".equals(padding)) {
            return new long[] {0, 0};
        }
        if (!"same".equals(padding)) {
            return new long[] {ConvolutionStrategy.at(call, "padding", 0, 0), ConvolutionStrategy.at(call, "padding", 1, 0)};
        }
        long[] out = new long[2];
        for (int i = 0; i < 2; i++) {
            long span = ConvolutionStrategy.at(call, "dilation", i, 1) * (weight.size(2 + i) - 1);
            if (span % 2 != 0) {
                return null; // libtorch pads one more row or column at the end
            }
            out[i] = span / 2;
        }
        return out;
    }

    /** The kernel of {@code plan} for {@code call} on {@code inputs}: the halo exchange, then the convolution. */
    static DeviceKernel kernel(AtenCall call, List<TensorMeta> inputs, Plan plan) {
        return new Kernel(localCall(call, inputs), inputs.get(INPUT).sharding().mesh(), plan);
    }

    /** {@code aten::convolution} with {@code call}'s stride, dilation, groups and width padding, and no padding in height. */
    private static AtenCall localCall(AtenCall call, List<TensorMeta> inputs) {
        Overload convolution = AtenOps.overload("convolution", "");
        long[] stride = {ConvolutionStrategy.at(call, "stride", 0, 1), ConvolutionStrategy.at(call, "stride", 1, 1)};
        long[] dilation = {ConvolutionStrategy.at(call, "dilation", 0, 1), ConvolutionStrategy.at(call, "dilation", 1, 1)};
        Object groups = call.constant("groups");
        List<AtenCall.Arg> args = List.of(new AtenCall.Input(INPUT), new AtenCall.Input(WEIGHT),
            inputs.size() > 2 ? new AtenCall.Input(2) : new AtenCall.Constant(null), new AtenCall.Constant(stride),
            new AtenCall.Constant(new long[] {0, padding(call, inputs.get(WEIGHT))[1]}), new AtenCall.Constant(dilation),
            new AtenCall.Constant(false), new AtenCall.Constant(new long[] {0, 0}),
            new AtenCall.Constant(groups == null ? 1L : ((Number) groups).longValue()));
        return new AtenCall(convolution, args);
    }

    /** The halo exchange along the plan's mesh dimension, then {@code local} on the haloed rows. */
    private record Kernel(AtenCall local, DeviceMesh mesh, Plan plan) implements DeviceKernel {
        @Override
        public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
            if (plan.halo() == 0) {
                return convolve(inputs, inputs.get(INPUT));
            }
            try (HaloExchange exchange = new HaloExchange(ctx.groupOver(mesh, new int[] {plan.meshDim()}));
                 Tensor haloed = exchange.exchange(inputs.get(INPUT), plan.height(), plan.halo())) {
                return convolve(inputs, haloed);
            }
        }

        /**
         * {@code local} on {@code rows} in place of the input; with no row of this device's own, one zero row more, none
         * kept; with no output channel of the weight (a weight sharded on more devices than it has channels), one zero
         * channel more, none kept.
         */
        private List<Tensor> convolve(List<Tensor> inputs, Tensor rows) {
            Tensor weight = inputs.get(WEIGHT);
            if (weight.size(0) == 0) {
                return withoutOutputChannels(inputs, rows);
            }
            List<Tensor> args = new ArrayList<>(inputs);
            if (inputs.get(INPUT).size(2) > 0) {
                args.set(INPUT, rows);
                return local.call(args);
            }
            try (Tensor taller = torch.constant_pad_nd(rows, new long[] {0, 0, 0, 1})) {
                args.set(INPUT, taller);
                List<Tensor> one = local.call(args);
                try (Tensor row = one.getFirst(); Tensor none = row.narrow(2, 0, 0)) {
                    return List.of(none.contiguous());
                }
            }
        }

        /**
         * The convolution of a device whose weight shard has no output channel: libtorch refuses a weight with none, so
         * the device convolves with one zero channel (and a zero bias element) and keeps no channel of the result, which
         * then has the output's dtype, rows and width.
         */
        private List<Tensor> withoutOutputChannels(List<Tensor> inputs, Tensor rows) {
            List<Tensor> args = new ArrayList<>(inputs);
            Tensor weight = inputs.get(WEIGHT);
            long[] zeros = new long[2 * (int) weight.dim()];
            zeros[zeros.length - 1] = 1;
            try (Tensor one = torch.constant_pad_nd(weight, zeros);
                 Tensor bias = inputs.size() > 2 && inputs.get(2) != null ? torch.constant_pad_nd(inputs.get(2), new long[] {0, 1}) : null) {
                args.set(WEIGHT, one);
                if (bias != null) {
                    args.set(2, bias);
                }
                List<Tensor> out = convolve(args, rows);
                try (Tensor channel = out.getFirst(); Tensor none = channel.narrow(1, 0, 0)) {
                    return List.of(none.contiguous());
                }
            }
        }
    }
}
