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
 * {@code permute(dims)} and {@code transpose(a, b)}: the result's dimension i is the input's
 * {@code dims[i]}. The local result is a view of the local input, as in torch.
 *
 * <p>Sharding rule: every placement is allowed; {@code S(d)} becomes {@code S(i)} where {@code dims[i] = d}.
 *
 * <p>Thread-safe: immutable.
 */
public final class PermuteSpec implements OpSpec {
    private final int[] dims;
    private final String name;

    private PermuteSpec(String name, int[] dims) {
        this.name = name;
        this.dims = dims.clone();
    }

    /** A permutation of all dimensions. */
    public static PermuteSpec permute(int... dims) {
        return new PermuteSpec("permute", Objects.requireNonNull(dims, "permute: dims is null"));
    }

    /** The swap of two dimensions of a tensor of {@code ndim} dimensions. */
    public static PermuteSpec transpose(int ndim, int a, int b) {
        int da = Rules.normalizeDim("transpose", a, ndim);
        int db = Rules.normalizeDim("transpose", b, ndim);
        int[] dims = new int[ndim];
        for (int i = 0; i < ndim; i++) {
            dims[i] = i == da ? db : i == db ? da : i;
        }
        return new PermuteSpec("transpose", dims);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name, inputs, 1);
        TensorMeta t = inputs.getFirst();
        int n = t.ndim();
        int[] normalized = new int[dims.length];
        boolean[] seen = new boolean[n];
        if (dims.length != n) {
            throw new IllegalArgumentException(name + ": " + Arrays.toString(dims) + " is not a permutation of " + n + " dimensions");
        }
        for (int i = 0; i < n; i++) {
            normalized[i] = Rules.normalizeDim(name, dims[i], n);
            if (seen[normalized[i]]) {
                throw new IllegalArgumentException(name + ": " + Arrays.toString(dims) + " repeats dimension " + normalized[i]);
            }
            seen[normalized[i]] = true;
        }
        long[] shape = new long[n];
        int[] inverse = new int[n];
        for (int i = 0; i < n; i++) {
            shape[i] = t.size(normalized[i]);
            inverse[normalized[i]] = i;
        }
        List<Placement> out = new ArrayList<>();
        for (Placement p : t.placements()) {
            int d = Rules.shardDim(p);
            out.add(d >= 0 ? Placement.shard(inverse[d]) : p);
        }
        return List.of(new TensorMeta(shape, t.dtype(), Rules.sharding(t.sharding().mesh(), out)));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        long[] order = Arrays.stream(dims).mapToLong(d -> Rules.normalizeDim(name, d, dims.length)).toArray();
        return new LocalKernel(in -> in.getFirst().permute(order));
    }

    int[] dims() {
        return dims.clone();
    }

    /** A permutation named {@code permute} or {@code transpose}, as rebuilt in a worker process. */
    static PermuteSpec restore(String name, int[] dims) {
        if (!name.equals("permute") && !name.equals("transpose")) {
            throw new IllegalArgumentException("a permutation is named permute or transpose, got '" + name + "'");
        }
        return new PermuteSpec(name, dims);
    }
}
