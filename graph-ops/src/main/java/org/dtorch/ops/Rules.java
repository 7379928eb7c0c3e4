package org.dtorch.ops;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;
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
        numel(op, out);
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
        int i = TorchTensors.canonical(a).ordinal();
        int j = TorchTensors.canonical(b).ordinal();
        ScalarType known = PROMOTED[i][j];
        if (known == null) {
            known = TorchTensors.canonical(torch.promote_types(TYPES[i], TYPES[j]));
            PROMOTED[i][j] = known;
        }
        return known;
    }

    /** {@link #resultType}'s answers, by the two dtypes and which of the two tensors are 0-d. */
    private static final java.util.Map<List<Integer>, ScalarType> RESULT_TYPES = new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * torch's result type of two tensors ({@code torch.result_type}): as {@link #promote}, except that a 0-d tensor beside
     * a dimensioned one promotes it only into a higher category (bool, integer, floating): {@code bfloat16[3] + float32[]}
     * is bfloat16. Asked of libtorch once per case, on empty tensors.
     */
    static ScalarType resultType(ScalarType a, boolean aScalar, ScalarType b, boolean bScalar) {
        if (aScalar == bScalar) {
            return promote(a, b);
        }
        List<Integer> key = List.of(TorchTensors.canonical(a).ordinal(), TorchTensors.canonical(b).ordinal(), aScalar ? 1 : 0);
        return RESULT_TYPES.computeIfAbsent(key, k -> {
            try (ScalarTypeOptional ta = new ScalarTypeOptional(a); ScalarTypeOptional tb = new ScalarTypeOptional(b);
                 TensorOptions none = new TensorOptions(); TensorOptions oa = none.dtype(ta); TensorOptions ob = none.dtype(tb);
                 Tensor x = torch.zeros(aScalar ? new long[0] : new long[] {1}, oa); Tensor y = torch.zeros(bScalar ? new long[0] : new long[] {1}, ob)) {
                return TorchTensors.canonical(torch.result_type(x, y));
            }
        });
    }

    static boolean isFloating(ScalarType t) {
        int i = TorchTensors.canonical(t).ordinal();
        Boolean known = FLOATING[i];
        if (known == null) {
            known = torch.isFloatingType(TYPES[i]);
            FLOATING[i] = known;
        }
        return known;
    }

    /** A dimension index in {@code [-ndim, ndim)} made non-negative ({@link Shapes#normalizeDim}). */
    static int normalizeDim(String op, int dim, int ndim) {
        return Shapes.normalizeDim(op, dim, ndim);
    }

    /** The element count of {@code shape} ({@link Shapes#numel}). */
    static long numel(String op, long[] shape) {
        return Shapes.numel(op, shape);
    }

    /** {@code [min, max]} of an integral dtype (bool excluded), or null for bool, floating and other dtypes. */
    static long[] integralRange(ScalarType t) {
        return switch (TorchTensors.canonical(t)) {
            case Byte -> new long[] {0, 255};
            case Char -> new long[] {Byte.MIN_VALUE, Byte.MAX_VALUE};
            case Short -> new long[] {Short.MIN_VALUE, Short.MAX_VALUE};
            case Int -> new long[] {Integer.MIN_VALUE, Integer.MAX_VALUE};
            case Long -> new long[] {Long.MIN_VALUE, Long.MAX_VALUE};
            default -> null;
        };
    }

    /**
     * True when casting every partial value to {@code to} and then reducing with {@code op} gives the cast of
     * the reduction, for every value the parts can hold. The table, per reduction:
     * <pre>
     *   from -> to                   sum, product   avg    max, min
     *   same dtype                   yes            yes    yes
     *   floating -> floating         yes (*)        yes    yes (rounding is monotone)
     *   integral -> floating         yes (*)        no     yes
     *   integral -> integral         yes (**)       no     only if widening (narrowing wraps)
     *   floating -> integral         no (rounds each part; +-inf identities of max/min have no integer)
     *   anything -> bool, bool -> *  no             no     bool -> any: yes (monotone); any -> bool: no
     * </pre>
     * (*) up to floating-point rounding, as any reduction order. (**) integer arithmetic wraps: narrowing casts
     * are ring homomorphisms and commute exactly; widening ones commute unless the reduction overflowed the
     * source dtype, whose own result would then have wrapped.
     */
    static boolean castCommutes(ReduceOpType op, ScalarType from, ScalarType to) {
        ScalarType f = TorchTensors.canonical(from);
        ScalarType t = TorchTensors.canonical(to);
        if (f == t) {
            return true;
        }
        boolean extremum = op == ReduceOpType.MAX || op == ReduceOpType.MIN;
        if (t == ScalarType.Bool) {
            return false;
        }
        if (f == ScalarType.Bool) {
            return extremum;
        }
        boolean fromFloating = isFloating(f);
        boolean toFloating = isFloating(t);
        if (fromFloating && !toFloating) {
            return false;
        }
        if (op == ReduceOpType.AVG) {
            return fromFloating;
        }
        if (toFloating || !extremum) {
            return true;
        }
        long[] source = integralRange(f);
        long[] target = integralRange(t);
        return source != null && target != null && target[0] <= source[0] && source[1] <= target[1];
    }

    /**
     * Refuses a cast of {@code t} to {@code to} where a partial placement does not commute with it (see
     * {@link #castCommutes}): no redistribution is inserted implicitly, the caller reduces first.
     */
    static void checkPartialCast(String op, List<TensorMeta> inputs, TensorMeta t, ScalarType to) {
        for (int m = 0; m < t.placements().size(); m++) {
            if (t.placement(m) instanceof Partial p && !castCommutes(p.op(), t.dtype(), to)) {
                throw reject(op, inputs, m, "casting each partial value of " + p + " from " + TorchTensors.dtypeName(t.dtype()) + " to "
                    + TorchTensors.dtypeName(to) + " and then reducing is not the cast of their " + p.op().shortName()
                    + "; redistribute to R (Replicate) first",
                    "S, R, or P(op) where the cast commutes with op (same dtype; floating to floating; integral to floating for "
                        + "sum, product, max, min; integral to integral for sum and product, widening only for max and min; "
                        + "bool to any for max and min)");
            }
        }
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
