package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.Index;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Python source text of the values a {@link Step} holds: numbers, dtypes, placements, index items and ATen arguments, as
 * a script under {@code ./dtorch run} writes them.
 *
 * <p>Stateless. Thread-safe.
 */
final class Py {
    private Py() {
    }

    static String dtype(ScalarType t) {
        return "torch." + TorchTensors.dtypeName(t);
    }

    /** A Python float literal: always with a point or an exponent, so Python reads a float. */
    static String number(double v) {
        if (Double.isNaN(v)) {
            return "float('nan')";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "float('inf')" : "float('-inf')";
        }
        return Double.toString(v);
    }

    /** A number as Python writes it: a {@code Long} as an int, a {@code Double} as a float. */
    static String number(Number n) {
        return n instanceof Double d ? number(d.doubleValue()) : Long.toString(n.longValue());
    }

    static String placement(Placement p) {
        if (p instanceof Shard s) {
            return "Shard(" + s.dim() + ")";
        }
        if (p instanceof Partial pa) {
            return pa.op() == ReduceOpType.SUM ? "Partial()" : "Partial(\"" + pa.op().name().toLowerCase(java.util.Locale.ROOT) + "\")";
        }
        return "Replicate()";
    }

    static String placements(List<Placement> ps) {
        return ps.stream().map(Py::placement).collect(Collectors.joining(", ", "[", "]"));
    }

    /** The items between the brackets of {@code t[...]}. */
    static String index(List<Index> items) {
        List<String> parts = new ArrayList<>();
        for (Index i : items) {
            parts.add(switch (i) {
                case Index.At a -> Long.toString(a.index());
                case Index.Slice s -> (s.start() == null ? "" : s.start().toString()) + ":" + (s.stop() == null ? "" : s.stop().toString())
                    + (s.step() == 1 ? "" : ":" + s.step());
                case Index.Ellipsis e -> "...";
                case Index.NewAxis n -> "None";
            });
        }
        return String.join(", ", parts);
    }

    /** An ATen argument of kind {@code kind} ({@code T} and {@code [T]} take names from {@code tensors}). */
    static String argument(String kind, Object value, List<String> tensors, int[] next) {
        if (kind.equals("T")) {
            return tensors.get(next[0]++);
        }
        if (kind.equals("[T]")) {
            int n = ((List<?>) value).size();
            List<String> names = tensors.subList(next[0], next[0] + n);
            next[0] += n;
            return "[" + String.join(", ", names) + "]";
        }
        return constant(value);
    }

    static String constant(Object value) {
        return switch (value) {
            case null -> "None";
            case Boolean b -> b ? "True" : "False";
            case Double d -> number(d.doubleValue());
            case Long l -> Long.toString(l);
            case Integer i -> Integer.toString(i);
            case String s -> "'" + s + "'";
            case ScalarType t -> dtype(t);
            case List<?> l -> l.stream().map(Py::constant).collect(Collectors.joining(", ", "[", "]"));
            default -> throw new IllegalArgumentException("no Python literal for " + value.getClass().getSimpleName());
        };
    }

    /** A Python int tuple or list literal {@code [a, b]}. */
    static String ints(long[] values) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < values.length; i++) {
            out.append(i > 0 ? ", " : "").append(values[i]);
        }
        return out.append(']').toString();
    }

    static String ints(int[] values) {
        return ints(java.util.Arrays.stream(values).asLongStream().toArray());
    }
}
