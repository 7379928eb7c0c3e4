package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code reshape(shape)} and {@code view(shape)}; one dimension may be {@code -1}. Locally a view where
 * torch can make one, as {@code reshape} does.
 *
 * <p>Sharding rule: R and P pass through. A sharded dimension must survive the reshape unchanged: the result
 * must have a dimension of the same size with the same number of elements before it, which becomes the new
 * shard dimension. Merging a sharded dimension with others, or splitting it, would need data from other
 * devices (the balanced split of the merged dimension differs) and is rejected.
 *
 * <p>Thread-safe: immutable.
 */
public final class ReshapeSpec implements OpSpec {
    private final long[] requested;
    private final String name;

    /** A reshape ({@code view} when {@code asView}) to {@code shape}. */
    public ReshapeSpec(long[] shape, boolean asView) {
        this.name = asView ? "view" : "reshape";
        this.requested = Objects.requireNonNull(shape, () -> name + ": shape is null").clone();
    }

    @Override
    public String name() {
        return name;
    }

    private long[] resolve(TensorMeta t) {
        long[] shape = requested.clone();
        int inferred = -1;
        for (int i = 0; i < shape.length; i++) {
            if (shape[i] == -1) {
                if (inferred >= 0) {
                    throw new IllegalArgumentException(name + ": only one dimension can be -1 in " + Arrays.toString(requested));
                }
                inferred = i;
            } else if (shape[i] < 0) {
                throw new IllegalArgumentException(name + ": invalid size " + shape[i] + " in " + Arrays.toString(requested));
            }
        }
        long[] given = Arrays.stream(shape).filter(s -> s != -1).toArray();
        long known = Rules.numel(name, given);
        if (inferred >= 0) {
            if (known == 0 || t.numel() % known != 0) {
                throw new IllegalArgumentException(name + ": cannot view " + Arrays.toString(t.shape()) + " as " + Arrays.toString(requested));
            }
            shape[inferred] = t.numel() / known;
        }
        if (Rules.numel(name, shape) != t.numel()) {
            throw new IllegalArgumentException(name + ": cannot view " + Arrays.toString(t.shape()) + " (" + t.numel() + " elements) as "
                + Arrays.toString(requested));
        }
        return shape;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name, inputs, 1);
        TensorMeta t = inputs.getFirst();
        long[] shape = resolve(t);
        List<Placement> out = new ArrayList<>();
        for (int m = 0; m < t.placements().size(); m++) {
            Placement p = t.placement(m);
            int d = Rules.shardDim(p);
            if (d < 0) {
                out.add(p);
                continue;
            }
            long before = 1;
            for (int i = 0; i < d; i++) {
                before *= t.size(i);
            }
            int k = -1;
            long prefix = 1;
            for (int j = 0; j < shape.length; j++) {
                if (prefix == before && shape[j] == t.size(d)) {
                    k = j;
                    break;
                }
                prefix *= shape[j];
            }
            if (k < 0) {
                throw Rules.reject(name, inputs, m, "sharded dimension " + d + " (size " + t.size(d) + ") does not survive the reshape to "
                    + Arrays.toString(shape), "R, P, or S(d) where the result keeps dimension d whole, with the same elements before it");
            }
            out.add(Placement.shard(k));
        }
        return List.of(new TensorMeta(shape, t.dtype(), Rules.sharding(t.sharding().mesh(), out)));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        long[] local = op.outputs().getFirst().meta().layout().localShape(deviceId);
        return new LocalKernel(in -> in.getFirst().reshape(local));
    }

    long[] requested() {
        return requested.clone();
    }

    boolean asView() {
        return name.equals("view");
    }
}
