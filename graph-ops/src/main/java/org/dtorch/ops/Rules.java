package org.dtorch.ops;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.communication.ReduceOpType;

/**
 * Checks and arithmetic the sharding rules share: one mesh for all inputs, broadcasting, dtype promotion,
 * dimension normalization.
 *
 * <p>Thread-safe: stateless.
 */
final class Rules {

    private Rules() {
    }

    /** The one mesh every input lives on; inputs on different meshes are an error naming both. */
    static DeviceMesh sameMesh(String op, List<TensorMeta> inputs) {
        DeviceMesh mesh = inputs.getFirst().sharding().mesh();
        for (TensorMeta m : inputs) {
            if (!m.sharding().mesh().sameDevicesAs(mesh)) {
                throw new IllegalArgumentException(op + ": inputs live on different meshes, " + mesh + " and " + m.sharding().mesh()
                    + "; redistribute one of them onto the other's mesh first");
            }
        }
        return mesh;
    }

    static void arity(String op, List<TensorMeta> inputs, int expected) {
        if (inputs.size() != expected) {
            throw new IllegalArgumentException(op + " takes " + expected + " input" + (expected == 1 ? "" : "s") + ", got " + inputs.size());
        }
    }

    /** NumPy broadcasting of two shapes. */
    static long[] broadcast(String op, long[] a, long[] b) {
        int n = Math.max(a.length, b.length);
        long[] out = new long[n];
        for (int k = 0; k < n; k++) {
            long x = dimFromRight(a, n, k);
            long y = dimFromRight(b, n, k);
            if (x != y && x != 1 && y != 1) {
                throw new IllegalArgumentException(op + ": shapes " + Arrays.toString(a) + " and " + Arrays.toString(b)
                    + " do not broadcast (dimension " + k + " of the result: " + x + " vs " + y + ")");
            }
            out[k] = x == 1 ? y : x;
        }
        return out;
    }

    /** Size of output dimension k of an n-dim result, seen from a shape aligned to the right; 1 if absent. */
    static long dimFromRight(long[] shape, int n, int k) {
        int i = k - (n - shape.length);
        return i < 0 ? 1 : shape[i];
    }

    private static final ScalarType[] TYPES = ScalarType.values();
    private static final ScalarType[][] PROMOTED = new ScalarType[TYPES.length][TYPES.length];
    private static final Boolean[] FLOATING = new Boolean[TYPES.length];

    /** torch's type promotion of two tensors (asked of libtorch once per pair, then remembered). */
    static ScalarType promote(ScalarType a, ScalarType b) {
        int i = a.intern().ordinal();
        int j = b.intern().ordinal();
        ScalarType known = PROMOTED[i][j];
        if (known == null) {
            known = torch.promote_types(TYPES[i], TYPES[j]).intern();
            PROMOTED[i][j] = known;
        }
        return known;
    }

    static boolean isFloating(ScalarType t) {
        int i = t.intern().ordinal();
        Boolean known = FLOATING[i];
        if (known == null) {
            known = torch.isFloatingType(TYPES[i]);
            FLOATING[i] = known;
        }
        return known;
    }

    /** The dtype of {@code tensor op scalar}: a floating scalar turns an integral tensor into float32. */
    static ScalarType withScalar(ScalarType tensor, boolean floatingScalar) {
        return floatingScalar && !isFloating(tensor) ? ScalarType.Float : tensor;
    }

    /** A dimension index in {@code [-ndim, ndim)} made non-negative. */
    static int normalizeDim(String op, int dim, int ndim) {
        int d = dim < 0 ? dim + ndim : dim;
        if (d < 0 || d >= ndim) {
            throw new IllegalArgumentException(op + ": dimension " + dim + " is out of range for a tensor of " + ndim + " dimensions");
        }
        return d;
    }

    static boolean isPartialSum(Placement p) {
        return p instanceof Partial partial && partial.op() == ReduceOpType.SUM;
    }

    /** The tensor dimension sharded by {@code p}, or -1. */
    static int shardDim(Placement p) {
        return p instanceof Shard s ? s.dim() : -1;
    }

    static Sharding sharding(DeviceMesh mesh, List<Placement> placements) {
        return new Sharding(mesh, placements);
    }

    static ShardingException reject(String op, List<TensorMeta> inputs, int meshDim, String reason, String legal) {
        return new ShardingException(op, inputs, "on mesh dimension " + meshDim + ", " + reason, legal);
    }

    /** A factory's metadata, rejecting partial placements (a factory has no partial values to split). */
    static TensorMeta factoryMeta(String op, TensorMeta meta) {
        for (int m = 0; m < meta.placements().size(); m++) {
            if (meta.placement(m).isPartial()) {
                throw new ShardingException(op, List.of(meta), "mesh dimension " + m + " is partial", "S(d) or R on every mesh dimension");
            }
        }
        return meta;
    }
}
