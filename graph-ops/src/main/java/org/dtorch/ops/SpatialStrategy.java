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
 * {@code adaptive_avg_pool*} has no meta kernel in libtorch; its output shape is the leading dimensions followed by
 * {@code output_size}. {@code max_pool3d} and {@code max_pool3d_with_indices} have none either and are not in the table
 * (no pooling formula here yet), so they are refused.
 *
 * <p>Immutable. Thread-safe.
 */
final class SpatialStrategy implements ShardingStrategy {
    /** Pooling operators, by name. */
    static final Set<String> POOLING = Set.of("max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices",
        "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool1d",
        "adaptive_max_pool2d", "adaptive_max_pool3d");
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
            boolean kept = d >= 0 && d < leading || Rules.isPartialSum(p) && linear(call);
            in.add(kept ? p : Placement.replicate());
        }
        return new Decision(List.of(in), Collections.nCopies(outputs, in));
    }

    /** For adaptive average pooling: the leading dimensions, then {@code output_size}. */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        if (!call.overload().name().contains("adaptive_avg_pool") || !(call.constant("output_size") instanceof long[] size)) {
            return null;
        }
        TensorMeta t = inputs.getFirst();
        int leading = t.ndim() - size.length;
        if (size.length != spatialDims(call) || leading < 1 || leading > 2) {
            throw new IllegalArgumentException(call.qualifiedName() + ": input " + Arrays.toString(t.shape())
                + " should have " + (size.length + 1) + " or " + (size.length + 2) + " dimensions, output_size " + size.length);
        }
        long[] shape = Arrays.copyOf(t.shape(), t.ndim());
        System.arraycopy(size, 0, shape, leading, size.length);
        return shape;
    }
}
