package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * {@code narrow(dim, start, length)}: a view of {@code length} elements of {@code dim} from {@code start}
 * (a negative {@code dim} or {@code start} counts from the end, as in torch).
 *
 * <p>Sharding rule: the narrowed dimension must be whole on every device ({@code S(dim)} is rejected);
 * everything else passes through.
 *
 * <p>Thread-safe: immutable.
 */
public final class NarrowSpec implements OpSpec {
    private final int dim;
    private final long start;
    private final long length;

    /** A narrowing of {@code dim}. */
    public NarrowSpec(int dim, long start, long length) {
        this.dim = dim;
        this.start = start;
        this.length = length;
    }

    @Override
    public String name() {
        return "narrow";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta t = inputs.getFirst();
        int d = Rules.normalizeDim(name(), dim, t.ndim());
        long first = start(t.size(d));
        if (length < 0 || first > t.size(d) - length) {
            throw new IllegalArgumentException("narrow: start " + start + " and length " + length + " do not fit dimension " + d
                + " of size " + t.size(d));
        }
        for (int m = 0; m < t.placements().size(); m++) {
            if (t.placement(m).isShard(d)) {
                throw Rules.reject(name(), inputs, m, "dimension " + d + " is sharded", "R, P, or S on a dimension other than " + d);
            }
        }
        long[] shape = t.shape();
        shape[d] = length;
        return List.of(new TensorMeta(shape, t.dtype(), t.sharding()));
    }

    /** The start in {@code [0, size]}: a negative one counts from the end, as in torch. */
    private long start(long size) {
        long first = start < 0 ? start + size : start;
        if (first < 0 || first > size) {
            throw new IllegalArgumentException("narrow: start " + start + " is out of range for a dimension of size " + size
                + " (expected to be in range of [" + -size + ", " + size + "])");
        }
        return first;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta input = op.inputs().getFirst().meta();
        int d = Rules.normalizeDim(name(), dim, input.ndim());
        long first = start(input.size(d));
        return new LocalKernel(in -> in.getFirst().narrow(d, first, length));
    }

    int dim() {
        return dim;
    }

    long start() {
        return start;
    }

    long length() {
        return length;
    }
}
