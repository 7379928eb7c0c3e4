package org.dtorch.ops.aten;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.pytorch.Dispatcher;
import org.bytedeco.pytorch.OperatorName;
import org.dtorch.core.device.Cuda;

/**
 * libtorch's {@code aten::} operators by name, read from the ATen dispatcher: the overloads of a name, each with its
 * schema ({@link Overload}), and the overload a call fits ({@link #bestPlan}). The GraalVM-free core that both the
 * {@code torch} module for scripts and the generic distributed operator ({@link org.dtorch.ops.AtenSpec}) use.
 *
 * <p>The dispatcher's list of names is read once (about 3,500 overloads of 1,900 names); each name's schemas are read
 * when the name is first asked for and kept for the life of the process, as the dispatcher keeps its operators.
 *
 * <p>Thread-safe: the name index is built once under a lock, the overloads are cached in a concurrent map and are
 * immutable.
 */
public final class AtenOps {
    private static final ConcurrentHashMap<String, List<Overload>> OVERLOADS = new ConcurrentHashMap<>();
    private static volatile Map<String, List<String>> overloadNames;

    private AtenOps() {
    }

    /** Every overload name of every {@code aten::} operator, by operator name. */
    private static Map<String, List<String>> overloadNames() {
        Map<String, List<String>> names = overloadNames;
        if (names != null) {
            return names;
        }
        synchronized (AtenOps.class) {
            if (overloadNames == null) {
                Cuda.loadNatives(); // before anything touches libtorch, or it never sees CUDA in this process
                Map<String, List<String>> index = new HashMap<>();
                OperatorName all = Dispatcher.singleton().getAllOpNames();
                for (long i = 0; i < all.limit(); i++) {
                    OperatorName op = all.getPointer(i);
                    String name = op.name().getString();
                    if (name.startsWith("aten::")) {
                        BytePointer overload = op.overload_name();
                        index.computeIfAbsent(name.substring(6), k -> new ArrayList<>()).add(overload == null ? "" : overload.getString());
                    }
                }
                overloadNames = Map.copyOf(index);
            }
            return overloadNames;
        }
    }

    /** True when {@code aten::<name>} exists. */
    public static boolean exists(String name) {
        return overloadNames().containsKey(name);
    }

    /**
     * The overloads of {@code aten::<name>}, the default overload first and then by overload name (so ties in cost go to
     * the same overload on every run), or null when there is no such operator.
     */
    public static List<Overload> overloads(String name) {
        List<Overload> known = OVERLOADS.get(name);
        if (known != null) {
            return known;
        }
        List<String> names = overloadNames().get(name);
        if (names == null) {
            return null;
        }
        return OVERLOADS.computeIfAbsent(name, n -> {
            List<Overload> list = new ArrayList<>();
            for (String overload : names) {
                list.add(new Overload(n, overload, Dispatcher.singleton().findSchemaOrThrow("aten::" + n, overload)));
            }
            list.sort(Comparator.comparing((Overload o) -> !o.overloadName().isEmpty()).thenComparing(Overload::overloadName));
            return List.copyOf(list);
        });
    }

    /** The overload {@code aten::<name>.<overloadName>} (empty for the default overload), or null. */
    public static Overload overload(String name, String overloadName) {
        List<Overload> all = overloads(name);
        if (all != null) {
            for (Overload o : all) {
                if (o.overloadName().equals(overloadName)) {
                    return o;
                }
            }
        }
        return null;
    }

    /** The cheapest way {@code signature} binds to one of {@code overloads} (the first on ties), or null when none takes it. */
    public static CallPlan bestPlan(List<Overload> overloads, ArgKind.Signature signature) {
        CallPlan best = null;
        for (Overload overload : overloads) {
            CallPlan plan = overload.bind(signature);
            if (plan != null && (best == null || plan.cost() < best.cost())) {
                best = plan;
            }
        }
        return best;
    }

    /** {@code aten::<name>}'s schemas, one a line, for error messages. */
    public static String describe(List<Overload> overloads) {
        List<String> out = new ArrayList<>();
        overloads.forEach(o -> out.add(o.signature()));
        return String.join("\n  ", out);
    }
}
