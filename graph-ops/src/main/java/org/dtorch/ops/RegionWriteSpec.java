package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.core.kernel.PartialValues;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.aten.ThreadOptionals;

/**
 * {@code x[region] = value} in place ({@code x[2:5] = v}, {@code x[..., i, :] = 0}): every device writes the part of the
 * region that falls in its own shard of {@code x}, and nothing else, so a write of one row into a tensor of many rows
 * touches one row's bytes wherever the tensor is sharded. {@code x} keeps its placements; the value (a tensor that
 * broadcasts to the region's shape, or a number) is moved where each device finds its part:
 * <ul>
 *   <li>where {@code x} is {@code R}, the value is {@code R} (every replica is written);</li>
 *   <li>where {@code x} is {@code S(d)}, the value is {@code R}, each device taking the part of it it needs (for one row,
 *       at most one row is gathered); but where the region takes dimension {@code d} whole and the value holds it at full
 *       size sharded alike (or partial), it stays (or is reduce-scattered) so, each device holding its part;</li>
 *   <li>where {@code x} is {@code P(op)}, the value is {@code P(op)} (a replicated value becomes partial locally: one holder
 *       keeps it, the others hold the identity), so the region's partial values reduce to the value. A number is
 *       written by the holders of coordinate 0 on those mesh dimensions, the identity of {@code op} by the others.</li>
 * </ul>
 * The value is converted to {@code x}'s dtype as {@code copy_} converts it. There is no output: {@code x} changes.
 *
 * <p>Immutable; the kernel of each device keeps only its bounds. Thread-safe.
 */
public final class RegionWriteSpec implements OpSpec, PlacementChoice {
    /** The bytes region writes have written into device tensors in this process, for tests and diagnostics. */
    private static final LongAdder BYTES_WRITTEN = new LongAdder();
    private static final List<Integer> FIRST = List.of(0);
    private final Region region;
    /** The number written, or null when the value is the second input. */
    private final ScalarValue scalar;
    /** The implicit moves' fit and the inference both ask for the decision. */
    private final LastResult<ShardingStrategy.Decision> lastDecision = new LastResult<>();

    private RegionWriteSpec(Region region, ScalarValue scalar) {
        this.region = Objects.requireNonNull(region, "region");
        this.scalar = scalar;
    }

    /** Writes the second input into {@code region} of the first. */
    public static RegionWriteSpec ofTensor(Region region) {
        return new RegionWriteSpec(region, null);
    }

    /** Writes {@code value} into {@code region} of the one input. */
    public static RegionWriteSpec ofNumber(Region region, double value) {
        return new RegionWriteSpec(region, ScalarValue.ofDouble(value));
    }

    /** Writes the exact integer {@code value} into {@code region} of the one input. */
    public static RegionWriteSpec ofNumber(Region region, long value) {
        return new RegionWriteSpec(region, ScalarValue.ofLong(value));
    }

    /** Writes {@code value} into {@code region} of the one input. */
    public static RegionWriteSpec ofNumber(Region region, boolean value) {
        return new RegionWriteSpec(region, ScalarValue.ofBool(value));
    }

    static RegionWriteSpec restore(Region region, ScalarValue scalar) {
        return new RegionWriteSpec(region, scalar);
    }

    /**
     * The bytes that region writes ({@code t[box] = v}) have written into device tensors in this process so far: a
     * device writes only the part of the box in its own shard. Worker processes count their own.
     */
    public static long bytesWritten() {
        return BYTES_WRITTEN.sum();
    }

    /** The region written. */
    public Region region() {
        return region;
    }

    ScalarValue scalar() {
        return scalar;
    }

    @Override
    public String name() {
        return "setitem";
    }

    /** {@code x} as it is, the value where each device finds its part of it (see the class comment). */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        return lastDecision.of(inputs, this::decide);
    }

    private ShardingStrategy.Decision decide(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, scalar == null ? 2 : 1);
        TensorMeta x = inputs.getFirst();
        region.check(name(), x.shape());
        if (scalar != null) {
            return new ShardingStrategy.Decision(List.of(x.placements()), List.of());
        }
        Rules.sameMesh(name(), inputs);
        TensorMeta v = inputs.get(1);
        long[] target = region.shape();
        int lead = leadingOnes(v.shape(), target);
        int[] kept = region.keptDims();
        List<Placement> value = new ArrayList<>();
        // A value's shard holds a device's part of the box only where the value is split like x up to that mesh
        // dimension: by the same mesh dimensions, outer first. Past the first mesh dimension where it is not, it is R.
        boolean[] alike = new boolean[x.ndim()];
        java.util.Arrays.fill(alike, true);
        for (int m = 0; m < x.placements().size(); m++) {
            Placement p = x.placement(m);
            int d = Rules.shardDim(p);
            Placement q = p.isPartial() ? p : Placement.replicate();
            if (d >= 0 && region.isWhole(d, x.size(d))) {
                // A replicated value needs no move: each device takes its part of it. One already sharded alike (or
                // partial, which a reduce-scatter shards more cheaply than an all-reduce replicates) stays sharded.
                int r = indexOf(kept, d);
                int j = r - (target.length - (v.ndim() - lead)) + lead;
                Placement own = v.placement(m);
                if (alike[d] && j >= lead && v.size(j) == x.size(d) && (own.isShard(j) || own.isPartial())) {
                    q = Placement.shard(j);
                } else {
                    alike[d] = false;
                }
            } else if (d >= 0) {
                alike[d] = false;
            }
            value.add(q);
        }
        return new ShardingStrategy.Decision(List.of(x.placements(), value), List.of());
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        ShardingStrategy.Decision d = choose(inputs);
        TensorMeta x = inputs.getFirst();
        ReduceOpType partial = null;
        for (Placement p : x.placements()) {
            if (p instanceof Partial q) {
                if (partial != null && partial != q.op()) {
                    throw new ShardingException(name(), inputs, "the tensor is partial with two reductions, " + partial.shortName() + " and "
                        + q.op().shortName(), "a tensor partial with one reduction at most");
                }
                partial = q.op();
            }
        }
        if (scalar != null) {
            scalar.checkFits(name(), x.dtype());
            return List.of();
        }
        TensorMeta v = inputs.get(1);
        long[] target = region.shape();
        long[] shape = v.shape();
        int lead = leadingOnes(shape, target);
        long[] trimmed = Arrays.copyOfRange(shape, lead, shape.length);
        if (!Arrays.equals(Rules.broadcast(name(), target, trimmed), target)) {
            throw new IllegalArgumentException(name() + ": a value of shape " + Arrays.toString(shape) + " does not broadcast to the region "
                + region + " of shape " + Arrays.toString(target));
        }
        if (!v.placements().equals(d.inputs().get(1))) {
            throw new ShardingException(name(), inputs, "the value has placements " + v.placements() + " where writing it into "
                + x.placements() + " needs " + d.inputs().get(1), "the value R where the tensor is R or S, sharded alike where the "
                + "region takes a sharded dimension whole, and the tensor's P where it is partial");
        }
        Rules.checkPartialCast(name(), inputs, new TensorMeta(x.shape(), v.dtype(), x.sharding()), x.dtype());
        return List.of();
    }

    /** The number of leading dimensions of size 1 that {@code shape} has beyond {@code target}'s rank (torch drops them). */
    private static int leadingOnes(long[] shape, long[] target) {
        int lead = 0;
        while (shape.length - lead > target.length && shape[lead] == 1) {
            lead++;
        }
        return lead;
    }

    private static int indexOf(int[] values, int value) {
        for (int i = 0; i < values.length; i++) {
            if (values[i] == value) {
                return i;
            }
        }
        return -1;
    }

    /** The tensor written: the first input. */
    @Override
    public List<Integer> writtenInputs(Operator op) {
        return FIRST;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta x = op.inputs().getFirst().meta();
        ShardLayout layout = x.layout();
        long[] offsets = layout.offsets(deviceId);
        long[] local = layout.localShape(deviceId);
        int n = x.ndim();
        long[] first = new long[n];
        long[] count = new long[n];
        boolean empty = false;
        for (int d = 0; d < n; d++) {
            long[] part = region.within(d, offsets[d], local[d]);
            first[d] = part[0];
            count[d] = part[1];
            empty |= count[d] == 0;
        }
        if (empty) {
            return (ctx, inputs) -> List.of(); // none of the region is on this device
        }
        // Where this device's part of the value starts in the value: its part of the box is taken from there.
        long[] valueOffsets = op.inputs().size() > 1 ? op.inputs().get(1).meta().layout().offsets(deviceId) : null;
        ReduceOpType identityOf = scalar == null ? null : identityFor(x, deviceId);
        long[] target = region.shape();
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                List<Tensor> views = new ArrayList<>();
                try {
                    Tensor view = inputs.getFirst();
                    for (int d = n - 1; d >= 0; d--) {
                        long start = region.starts()[d] + first[d] * region.steps()[d] - offsets[d];
                        long step = region.steps()[d];
                        if (!region.selected()[d] && start == 0 && step == 1 && count[d] == local[d]) {
                            continue; // the whole of this dimension: nothing to cut
                        }
                        Tensor next = region.selected()[d] ? view.select(d, start)
                            : step == 1 ? view.narrow(d, start, count[d])
                            : stepSlice(view, d, start, count[d], step);
                        views.add(next);
                        view = next;
                    }
                    if (scalar != null) {
                        try (Scalar s = identityOf != null ? PartialValues.identity(identityOf, x.dtype()) : scalar.toScalar()) {
                            view.fill_(s);
                        }
                    } else {
                        Tensor src = inputs.get(1);
                        int lead = leadingOnes(TorchTensors.shape(src), target);
                        int[] kept = region.keptDims();
                        for (int k = 0; k < lead; k++) {
                            src = src.select(0, 0);
                            views.add(src);
                        }
                        int rank = (int) src.dim();
                        for (int j = 0; j < rank; j++) {
                            int r = j + target.length - rank;
                            int d = kept[r];
                            long from = first[d] - valueOffsets[j + lead];
                            if (src.size(j) != 1 && (from != 0 || count[d] != src.size(j))) {
                                src = src.narrow(j, from, count[d]);
                                views.add(src);
                            }
                        }
                        view.copy_(src);
                    }
                    BYTES_WRITTEN.add(view.numel() * view.element_size());
                    return List.of();
                } finally {
                    views.forEach(Tensor::close);
                }
            }
        };
    }

    /** {@code count} elements of dimension {@code d} of {@code view} from {@code start}, {@code step} apart. */
    private static Tensor stepSlice(Tensor view, int d, long start, long count, long step) {
        ThreadOptionals optional = ThreadOptionals.get();
        return view.slice(d, optional.start(start), optional.end(start + (count - 1) * step + 1), step);
    }

    /**
     * For a number written into a partial tensor: the reduction whose identity this device writes instead, where it is not
     * coordinate 0 of a partial mesh dimension; else null (it writes the number).
     */
    private static ReduceOpType identityFor(TensorMeta x, long deviceId) {
        DeviceMesh mesh = x.sharding().mesh();
        int[] coords = mesh.coordinates(deviceId);
        for (int m = 0; m < mesh.ndim(); m++) {
            if (x.placement(m) instanceof Partial p && coords[m] != 0) {
                return p.op();
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return "RegionWriteSpec(" + region + (scalar == null ? "" : " = " + scalar) + ")";
    }
}
