package org.dtorch.polyglot;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.ops.aten.Overload;
import org.dtorch.polyglot.torch.Dtypes;
import org.graalvm.polyglot.Value;

/**
 * The arguments {@link PyBridge} receives from Python, as Java values: numbers, lists of them and of strings, placements
 * in their printed form ({@code "S(0)"}, {@code "R"}, {@code "P(sum)"}), dtype and device-type names. Every value is read
 * during the call that received it and never kept. An integer beyond int64 or a float going into an integral dtype is
 * checked here, as torch checks it.
 *
 * <p>Thread-safe: stateless.
 */
final class BridgeArguments {
    private BridgeArguments() {
    }

    /** A Python int as an exact long; one outside int64 is refused (the Python side raises OverflowError first). */
    static long exactLong(String op, Value v) {
        if (!v.fitsInLong()) {
            throw new ArithmeticException(op + ": the integer " + v + " does not fit in int64");
        }
        return v.asLong();
    }

    /** A Python number as a double; an int beyond 2^53 is rounded to the nearest double, as Python's float() does. */
    static double asDouble(Value v) {
        return v.fitsInDouble() ? v.asDouble() : v.fitsInLong() ? (double) v.asLong() : v.asDouble();
    }

    /** A float going into an integral dtype: truncated toward zero, as torch does; NaN, infinities and floats beyond int64 are refused. */
    static long truncated(String op, Value v) {
        double d = asDouble(v);
        if (!(d >= -0x1p63 && d < 0x1p63)) {
            throw new IllegalArgumentException(op + ": the value " + d + " cannot be converted to an integer dtype without overflow");
        }
        return (long) d;
    }

    static DeviceKind kindOf(String deviceType) {
        return switch (deviceType.toLowerCase(Locale.ROOT)) {
            case "cpu" -> DeviceKind.CPU;
            case "cuda", "gpu" -> DeviceKind.CUDA;
            default -> throw new IllegalArgumentException("unknown device type '" + deviceType + "' (expected 'cpu' or 'cuda')");
        };
    }

    /** The libtorch type of a dtype name for a distributed tensor: the {@code torch} module's names, less complex ones. */
    static ScalarType scalarType(String name) {
        ScalarType type = Dtypes.scalarType(name);
        if (type == ScalarType.ComplexFloat || type == ScalarType.ComplexDouble) {
            throw new IllegalArgumentException("dtype '" + name + "' is complex; distributed tensors take real and bool dtypes");
        }
        return type;
    }

    /** Parses {@code "S(0)"}, {@code "R"}, {@code "P(sum)"}. */
    static Placement placement(String text) {
        String s = text.trim();
        if (s.equals("R")) {
            return Placement.replicate();
        }
        if (s.startsWith("S(") && s.endsWith(")")) {
            return Placement.shard(Integer.parseInt(s.substring(2, s.length() - 1).trim()));
        }
        if (s.startsWith("P(") && s.endsWith(")")) {
            return Placement.partial(ReduceOpType.valueOf(s.substring(2, s.length() - 1).trim().toUpperCase(Locale.ROOT)));
        }
        throw new IllegalArgumentException("unknown placement '" + text + "' (expected S(d), R or P(op))");
    }

    /** Placements by their printed forms joined with commas, parsed once each (a model moves the same few often). */
    private static final Map<String, Placement[]> JOINED = new ConcurrentHashMap<>();

    /** A Python list of printed placements, or one string of them joined with commas ({@code "S(0),R"}). */
    static Placement[] placementArray(Value placements) {
        if (placements != null && placements.isString()) {
            String joined = placements.asString();
            Placement[] found = JOINED.get(joined);
            if (found == null) {
                found = joined.isEmpty() ? new Placement[0]
                    : Arrays.stream(joined.split(",")).map(BridgeArguments::placement).toArray(Placement[]::new);
                if (JOINED.size() < 1024) {
                    JOINED.put(joined, found);
                }
            }
            return found.clone();
        }
        return strings(placements).stream().map(BridgeArguments::placement).toArray(Placement[]::new);
    }

    /** {@code placements} on {@code mesh}, or {@code R} on every mesh dimension if there are none. */
    static Sharding sharding(DeviceMesh mesh, Placement[] placements) {
        return new Sharding(mesh, placements.length == 0 ? Collections.nCopies(mesh.ndim(), Placement.replicate()) : List.of(placements));
    }

    /** A Python int or a list of them; None is the empty list. */
    static long[] longs(Value v) {
        if (v == null || v.isNull()) {
            return new long[0];
        }
        if (v.isNumber()) {
            return new long[] {v.asLong()};
        }
        long[] out = new long[Math.toIntExact(v.getArraySize())];
        for (int i = 0; i < out.length; i++) {
            out[i] = v.getArrayElement(i).asLong();
        }
        return out;
    }

    /** {@link #longs}, each as an int (an {@link ArithmeticException} beyond one). */
    static int[] ints(Value v) {
        return Arrays.stream(longs(v)).mapToInt(Math::toIntExact).toArray();
    }

    /** A Python list of strings; None is the empty list. */
    static List<String> strings(Value v) {
        List<String> out = new ArrayList<>();
        if (v == null || v.isNull()) {
            return out;
        }
        for (long i = 0; i < v.getArraySize(); i++) {
            out.add(v.getArrayElement(i).asString());
        }
        return out;
    }

    /** The distributed tensor argument {@code param} of operator {@code op}, or an error telling how to make one. */
    static DTensor distributed(String op, Overload.Param param, Value v) {
        if (!(v.isHostObject() && v.asHostObject() instanceof DTensor t)) {
            throw new IllegalArgumentException(op + ": argument '" + param.name() + "' must be a dtorch.Tensor; "
                + "wrap local torch tensors with dtorch.Tensor(t, device_mesh=..., placements=...)");
        }
        return t;
    }

    /** A polyglot value as a plain Java value: null, Boolean, Long, Double, String, or a List of those. */
    static Object plainValue(Value v) {
        if (v.isNull()) {
            return null;
        }
        if (v.isBoolean()) {
            return v.asBoolean();
        }
        if (v.isNumber()) {
            return v.fitsInLong() ? (Object) v.asLong() : (Object) v.asDouble();
        }
        if (v.isString()) {
            return v.asString();
        }
        if (v.hasArrayElements()) {
            List<Object> out = new ArrayList<>();
            for (long i = 0; i < v.getArraySize(); i++) {
                out.add(plainValue(v.getArrayElement(i)));
            }
            return out;
        }
        if (v.isHostObject()) {
            return v.asHostObject();
        }
        throw new IllegalArgumentException("unsupported argument " + v);
    }
}
