package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * Operators that work on the last one, two or three (spatial) dimensions of one tensor, each batch and channel plane on
 * its own: pooling ({@link #POOLING}) and interpolation ({@link #INTERPOLATE}, the operators
 * {@code torch.nn.functional.interpolate} calls). The number of spatial dimensions is the name's ({@code max_pool2d}:
 * 2). Per mesh dimension:
 * <ul>
 *   <li>{@code S(d)} on a leading (batch or channel) dimension stays, and the outputs are {@code S(d)} (the indices of
 *       {@code max_pool*_with_indices} and {@code adaptive_max_pool*} count within one plane, so they are the same on a
 *       shard as on the whole tensor);</li>
 *   <li>{@code S(d)} on a spatial dimension is gathered to {@code R} first (a window may straddle shards; no halo
 *       exchange yet);</li>
 *   <li>{@code P(sum)} stays for the operators that are linear in their input (average pooling, every interpolation
 *       mode), else it is reduced to {@code R}.</li>
 * </ul>
 * {@code adaptive_avg_pool*}, {@code max_pool3d} and {@code max_pool3d_with_indices} have no meta kernel in libtorch;
 * their output shapes come from {@link #outputShape}.
 *
 * <p>Immutable. Thread-safe.
 */
final class SpatialStrategy implements ShardingStrategy {
    /** Pooling operators, by name. */
    static final Set<String> POOLING = Set.of("max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
        "max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool1d",
        "adaptive_max_pool2d", "adaptive_max_pool3d");
    /**
     * The backward operators of pooling that autograd issues, with the gradient of the output, the input and (max
     * pooling) the indices as inputs: each plane's gradient reads that plane alone, so a shard of a batch or channel
     * dimension stays, on every input alike.
     */
    static final Set<String> POOLING_BACKWARD = Set.of("max_pool2d_with_indices_backward", "avg_pool2d_backward",
        "adaptive_max_pool2d_backward", "avg_pool3d_backward");
    /** Interpolation operators, by name. */
    static final Set<String> INTERPOLATE = Set.of("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d",
        "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa");

    private static final Pattern DIMS = Pattern.compile("([123])d");

    static final SpatialStrategy POOLING_INSTANCE = new SpatialStrategy("pooling");
    static final SpatialStrategy INTERPOLATE_INSTANCE = new SpatialStrategy("interpolate");

    private final String family;

    private SpatialStrategy(String family) {
        this.family = family;
    }

    @Override
    public String family() {
        return family;
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; S(d) on a batch or channel dimension (not the last 1, 2 or 3 spatial ones); P(sum) only "
            + "for average pooling and interpolation, which are linear";
    }

    /** The number of spatial dimensions of {@code call}: the digit of its name's {@code 1d}, {@code 2d} or {@code 3d}. */
    static int spatialDims(AtenCall call) {
        Matcher m = DIMS.matcher(call.overload().name());
        m.find();
        return Integer.parseInt(m.group(1));
    }

    private static boolean linear(AtenCall call) {
        String name = call.overload().name();
        return INTERPOLATE.contains(name) || name.contains("avg_pool");
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        TensorMeta t = inputs.getFirst();
        int leading = t.ndim() - spatialDims(call);
        List<Placement> in = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            int d = Rules.shardDim(p);
            boolean backward = POOLING_BACKWARD.contains(call.overload().name());
            boolean kept = d >= 0 && d < leading || Rules.isPartialSum(p) && linear(call) && !backward;
            in.add(kept ? p : Placement.replicate());
        }
        return new Decision(Collections.nCopies(inputs.size(), in), Collections.nCopies(outputs, in));
    }

    /**
     * For operators without a meta kernel: adaptive average pooling gives the leading dimensions, then
     * {@code output_size}; max pooling ({@code max_pool3d}) gives per spatial dimension
     * {@code floor((L + 2p - d(k - 1) - 1 + (ceil_mode ? s - 1 : 0)) / s) + 1}, one less where ceil mode would start the
     * last window past the input and its left padding.
     */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        String name = call.overload().name();
        TensorMeta t = inputs.getFirst();
        int k = spatialDims(call);
        int leading = t.ndim() - k;
        if (leading < 1 || leading > 2) {
            throw new IllegalArgumentException(call.qualifiedName() + ": input " + Arrays.toString(t.shape()) + " should have "
                + (k + 1) + " or " + (k + 2) + " dimensions");
        }
        long[] shape = t.shape().clone();
        if (name.contains("adaptive_avg_pool") && call.constant("output_size") instanceof long[] size) {
            if (size.length != k) {
                throw new IllegalArgumentException(call.qualifiedName() + ": output_size " + Arrays.toString(size) + " should have "
                    + k + " elements");
            }
            System.arraycopy(size, 0, shape, leading, k);
            return shape;
        }
        if (!name.startsWith("max_pool")) {
            return null;
        }
        boolean ceil = Boolean.TRUE.equals(call.constant("ceil_mode"));
        for (int i = 0; i < k; i++) {
            long length = t.size(leading + i);
            long kernel = ConvolutionStrategy.at(call, "kernel_size", i, 1);
            long stride = ConvolutionStrategy.at(call, "stride", i, kernel);
            long padding = ConvolutionStrategy.at(call, "padding", i, 0);
            long span = ConvolutionStrategy.at(call, "dilation", i, 1) * (kernel - 1);
            long out = Math.floorDiv(length + 2 * padding - span - 1 + (ceil ? stride - 1 : 0), stride) + 1;
            if (ceil && (out - 1) * stride >= length + padding) {
                out--;
            }
            if (out < 1) {
                throw new IllegalArgumentException(call.qualifiedName() + ": the (dilated) kernel does not fit input "
                    + Arrays.toString(t.shape()) + " with its padding");
            }
            shape[leading + i] = out;
        }
        return shape;
    }

    /** For max pooling: one dilated kernel's extent per spatial dimension, so that the probe's output is not empty. */
    @Override
    public long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        long[][] shapes = ShardingStrategy.super.probeShapes(call, inputs);
        int k = spatialDims(call);
        long[] probe = shapes[0];
        for (int i = 0; call.overload().name().startsWith("max_pool") && i < k; i++) {
            long kernel = ConvolutionStrategy.at(call, "kernel_size", i, 1);
            probe[probe.length - k + i] = ConvolutionStrategy.at(call, "dilation", i, 1) * (kernel - 1) + 1;
        }
        return shapes;
    }
}
