package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Boolean indexing, {@code x[mask]}: {@code mask} (bool) covers the first {@code k} dimensions of {@code x} with their
 * sizes, and the result holds, along one new first dimension, the elements ({@code k == x.ndim}) or sub-tensors of
 * {@code x} where the mask is true, in row-major order, followed by {@code x}'s other dimensions: torch's
 * {@code aten::index.Tensor} with one bool index.
 *
 * <p>The result's first size is the mask's number of true elements, which only the values tell: the operator carries it
 * ({@link #count()}), read by the client beforehand ({@link #index}), and every device checks its mask against it.
 *
 * <p>Sharding rule: the mask is {@code R} on every mesh dimension (every device needs all of it); {@code x} may be
 * sharded on any dimension the mask does not cover, {@code S(d)} with {@code d >= k} giving {@code S(d - k + 1)}, since
 * every device then selects the same rows of its own shard; {@code P} stays {@code P} (selecting commutes with the
 * reduction of partial values); {@code R} stays {@code R}. {@code x} sharded on a dimension the mask covers would leave
 * every device a different number of rows, so {@link #index} replicates that mesh dimension first, with a warning once
 * ({@link FallbackWarnings}).
 *
 * <p>Thread-safe: immutable.
 */
public final class MaskIndexSpec implements OpSpec {
    /** The name the one-time warning gives the replicated case. */
    static final String FALLBACK_NAME = "aten::index.Tensor with a bool mask over a sharded dimension";
    private static final String LEGAL = "mask R on every mesh dimension; x R, P, or S(d) on a dimension d the mask does not cover";

    private final long count;

    /**
     * Boolean indexing whose mask has {@code count} true elements.
     *
     * @throws IllegalArgumentException for a negative count
     */
    public MaskIndexSpec(long count) {
        if (count < 0) {
            throw new IllegalArgumentException("index_by_mask: the count of true elements must be >= 0, got " + count);
        }
        this.count = count;
    }

    /**
     * {@code x[mask]}: checks the mask's dtype and shape, reads its number of true elements (a blocking read of a
     * count, up to the runtime's timeout: the synchronization point of boolean indexing), moves the mask to {@code R} and
     * {@code x}'s shards of covered dimensions to {@code R} (warning once, naming that communication), then indexes
     * every device's shard. The intermediate tensors are released once used.
     *
     * @throws IllegalArgumentException when the mask is not bool, has no dimension, or its shape is not {@code x}'s
     *                                  leading shape; checked before anything runs
     */
    public static DTensor index(DTensor x, DTensor mask) {
        Objects.requireNonNull(x, "index_by_mask: x is null");
        Objects.requireNonNull(mask, "index_by_mask: mask is null");
        checkMask(x.meta(), mask.meta());
        Rules.sameMesh("index_by_mask", List.of(x.meta(), mask.meta()));
        long count;
        try (DTensor counted = x.runtime().aten(CompareCalls.unary("count_nonzero"), mask).getFirst();
             Tensor value = counted.toTorch()) {
            count = value.item_long();
        }
        int k = mask.ndim();
        List<Placement> xTarget = new ArrayList<>(x.placements());
        for (int m = 0; m < xTarget.size(); m++) {
            if (xTarget.get(m) instanceof Shard s && s.dim() < k) {
                xTarget.set(m, Placement.replicate());
            }
        }
        List<Placement> maskTarget = java.util.Collections.nCopies(mask.placements().size(), Placement.replicate());
        List<DTensor> moved = new ArrayList<>(2);
        try {
            DTensor xs = x;
            if (!xTarget.equals(x.placements())) {
                DeviceMesh mesh = x.mesh();
                FallbackWarnings.warnOnce(FALLBACK_NAME, "input 0 " + x.placements() + " -> " + xTarget + " ("
                    + RedistributionPlanner.plan(x.meta().sharding(), new Sharding(mesh, xTarget), x.shape()) + ")");
                xs = x.redistribute(xTarget.toArray(Placement[]::new));
                moved.add(xs);
            }
            DTensor ms = mask;
            if (!maskTarget.equals(mask.placements())) {
                ms = mask.redistribute(maskTarget.toArray(Placement[]::new));
                moved.add(ms);
            }
            return x.runtime().apply(new MaskIndexSpec(count), xs, ms);
        } finally {
            moved.forEach(DTensor::close);
        }
    }

    /** The mask's dtype and shape against {@code x}, as torch checks them. */
    private static void checkMask(TensorMeta x, TensorMeta mask) {
        if (mask.dtype() != ScalarType.Bool) {
            throw new IllegalArgumentException("index_by_mask: the mask must be a bool tensor, got " + TorchTensors.dtypeName(mask.dtype()));
        }
        int k = mask.ndim();
        if (k == 0 || k > x.ndim()) {
            throw new IllegalArgumentException("index_by_mask: a mask of " + k + " dimensions cannot index a tensor of shape "
                + Arrays.toString(x.shape()) + " (it covers 1 to " + x.ndim() + " leading dimensions)");
        }
        for (int d = 0; d < k; d++) {
            if (mask.size(d) != x.size(d)) {
                throw new IllegalArgumentException("index_by_mask: the shape of the mask " + Arrays.toString(mask.shape()) + " at index " + d
                    + " does not match the shape of the indexed tensor " + Arrays.toString(x.shape()) + " at index " + d);
            }
        }
    }

    /** The number of true elements of the mask. */
    public long count() {
        return count;
    }

    @Override
    public String name() {
        return "index_by_mask";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 2);
        DeviceMesh mesh = Rules.sameMesh(name(), inputs);
        TensorMeta x = inputs.get(0);
        TensorMeta mask = inputs.get(1);
        checkMask(x, mask);
        int k = mask.ndim();
        List<Placement> out = new ArrayList<>(x.placements().size());
        for (int m = 0; m < x.placements().size(); m++) {
            if (!mask.placement(m).isReplicate()) {
                throw Rules.reject(name(), inputs, m, "the mask is " + mask.placement(m) + ", every device needs all of it", LEGAL);
            }
            Placement p = x.placement(m);
            if (p instanceof Shard s) {
                if (s.dim() < k) {
                    throw Rules.reject(name(), inputs, m, "x is sharded on dimension " + s.dim() + ", which the mask covers", LEGAL);
                }
                out.add(Placement.shard(s.dim() - k + 1));
            } else {
                out.add(p);
            }
        }
        long[] shape = new long[x.ndim() - k + 1];
        shape[0] = count;
        System.arraycopy(x.shape(), k, shape, 1, x.ndim() - k);
        return List.of(new TensorMeta(shape, x.dtype(), Rules.sharding(mesh, out)));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                Tensor x = inputs.get(0);
                Tensor mask = inputs.get(1);
                int k = (int) mask.dim();
                try (Tensor flatMask = mask.reshape(-1); Tensor rows = x.flatten(0, k - 1); Tensor found = torch.nonzero(flatMask);
                     Tensor index = found.reshape(-1)) {
                    if (index.size(0) != count) {
                        throw new IllegalStateException("index_by_mask: the mask on device " + deviceId + " has " + index.size(0)
                            + " true elements, but " + count + " were counted before the operator was queued (was the mask's memory "
                            + "written meanwhile, through a tensor given to from_local or taken from to_local?)");
                    }
                    return List.of(rows.index_select(0, index));
                }
            }
        };
    }

    @Override
    public String toString() {
        return "MaskIndexSpec(count=" + count + ")";
    }
}
