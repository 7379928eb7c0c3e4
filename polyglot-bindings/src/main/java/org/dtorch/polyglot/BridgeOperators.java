package org.dtorch.polyglot;

import static org.dtorch.polyglot.BridgeArguments.exactLong;
import static org.dtorch.polyglot.BridgeArguments.placementArray;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.ops.BinarySpec;
import org.dtorch.ops.ReduceSpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RingAttentionSpec;
import org.dtorch.ops.ScalarSpec;
import org.dtorch.ops.UnarySpec;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.polyglot.torch.AtenOperator;
import org.dtorch.polyglot.torch.TorchModule;
import org.graalvm.polyglot.Value;

/**
 * The operators {@link PyBridge} runs for Python: the hand-written ones by name ({@code add}, {@code relu}, {@code sum},
 * a tensor and a Python number whose type decides torch's promotion), any ATen operator through the overload the
 * {@code torch} module would choose for the same arguments ({@link #aten}), {@code t[index] = value}, and the checks of
 * ring attention.
 *
 * <p>Not thread-safe: the Python client thread that owns the runtime.
 */
final class BridgeOperators {
    private final DTorch runtime;
    private final Map<String, Map<String, DistributedCall>> bound = new ConcurrentHashMap<>();

    BridgeOperators(DTorch runtime) {
        this.runtime = runtime;
    }

    /** {@link PyBridge#binary}. */
    DTensor binary(String op, DTensor a, DTensor b) {
        return runtime.apply(switch (op) {
            case "add" -> BinarySpec.ADD;
            case "sub" -> BinarySpec.SUB;
            case "mul" -> BinarySpec.MUL;
            case "div" -> BinarySpec.DIV;
            default -> throw new IllegalArgumentException("unknown binary operator '" + op + "'");
        }, a, b);
    }

    /** {@link PyBridge#scalar}. */
    DTensor scalar(String op, DTensor t, Value value, String valueKind) {
        ScalarSpec.Kind kind = ScalarSpec.Kind.valueOf(op.toUpperCase(Locale.ROOT));
        return runtime.apply(switch (valueKind) {
            case "bool" -> new ScalarSpec(kind, value.asBoolean());
            case "int" -> new ScalarSpec(kind, exactLong(op, value));
            case "float" -> new ScalarSpec(kind, value.asDouble());
            default -> throw new IllegalArgumentException(op + ": unknown scalar kind '" + valueKind + "'");
        }, t);
    }

    /** {@link PyBridge#unary}. */
    DTensor unary(String op, DTensor t) {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.valueOf(op.toUpperCase(Locale.ROOT))), t);
    }

    /** {@link PyBridge#reduce}. */
    DTensor reduce(String kind, DTensor t, Value dims, boolean keepdim) {
        int[] d = BridgeArguments.ints(dims);
        return runtime.apply(new ReduceSpec(ReduceSpec.Kind.valueOf(kind.toUpperCase(Locale.ROOT)), d, keepdim), t);
    }

    /** {@link PyBridge#aten}. */
    Object[] aten(String name, String key, Value values) {
        DistributedCall call = bind(name, key);
        Value[] array = new Value[Math.toIntExact(values.getArraySize())];
        for (int i = 0; i < array.length; i++) {
            array[i] = values.getArrayElement(i);
        }
        return call.runArray(array);
    }

    /**
     * {@link PyBridge#atenCall}: the overload of {@code name} that {@code key} resolves to, bound once per name and key
     * (a concurrent cache: two threads may bind the same key at once, and either binding serves).
     */
    DistributedCall bind(String name, String key) {
        Map<String, DistributedCall> byKey = bound.computeIfAbsent(name, n -> new ConcurrentHashMap<>());
        DistributedCall call = byKey.get(key);
        if (call == null) {
            AtenOperator op = TorchModule.shared().op(name);
            if (op == null) {
                throw new IllegalArgumentException("libtorch has no operator aten::" + name);
            }
            call = new DistributedCall(runtime, name, op.resolve(key).plan(), ArgKind.Signature.parse(key));
            byKey.put(key, call);
        }
        return call;
    }

    /** {@link PyBridge#checkRingAttention}. */
    static void checkRingAttention(RingAttentionSpec spec, DTensor q, DTensor k, DTensor v, DTensor mask, DeviceMesh mesh, Value placements) {
        spec.check(q, k, v, mask, new Sharding(mesh, List.of(placementArray(placements))));
    }

    /** {@link PyBridge#setItem}. */
    void setItem(DTensor t, String items, Value value, String valueKind) {
        Region region = Index.region(t.shape(), indexItems(items));
        if (value.isHostObject() && value.asHostObject() instanceof DTensor v) {
            runtime.setRegion(t, region, v);
            return;
        }
        switch (valueKind) {
            case "bool" -> runtime.setRegion(t, region, value.asBoolean());
            case "int" -> runtime.setRegion(t, region, exactLong("setitem", value));
            case "float" -> runtime.setRegion(t, region, value.asDouble());
            default -> throw new IllegalArgumentException("setitem: unknown value kind '" + valueKind + "'");
        }
    }

    /**
     * The index items written as Python's setitem writes them, one string (read in one call, where a nested list would
     * take a call per number): items separated by {@code ;}, each {@code a<i>} (an int), {@code s<start>,<stop>,<step>}
     * (a slice, an empty bound for None), {@code n} (None) or {@code e} (Ellipsis).
     */
    static Index[] indexItems(String items) {
        if (items.isEmpty()) {
            return new Index[0];
        }
        String[] parts = items.split(";", -1);
        Index[] out = new Index[parts.length];
        for (int i = 0; i < parts.length; i++) {
            String item = parts[i];
            try {
                out[i] = switch (item.isEmpty() ? ' ' : item.charAt(0)) {
                    case 'a' -> Index.at(Long.parseLong(item, 1, item.length(), 10));
                    case 's' -> slice(item);
                    case 'n' -> Index.none();
                    case 'e' -> Index.ellipsis();
                    default -> throw new IllegalArgumentException("setitem: unknown index item '" + item + "'");
                };
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("setitem: index item " + i + " (" + item + ") holds a number beyond int64", e);
            }
        }
        return out;
    }

    private static Index slice(String item) {
        int first = item.indexOf(',');
        int second = item.indexOf(',', first + 1);
        if (first < 0 || second < 0) {
            throw new IllegalArgumentException("setitem: unknown index item '" + item + "'");
        }
        return Index.slice(bound(item, 1, first), bound(item, first + 1, second),
            Long.parseLong(item, second + 1, item.length(), 10));
    }

    private static Long bound(String item, int from, int to) {
        return from == to ? null : Long.parseLong(item, from, to, 10);
    }
}
