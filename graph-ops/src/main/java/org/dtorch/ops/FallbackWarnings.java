package org.dtorch.ops;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The one-time warning for an operator that runs through the {@link ReplicateStrategy} because no family strategy
 * covers it: it names the operator and the communication its replicated inputs cost, once per operator and process.
 *
 * <p>Thread-safe: a concurrent set decides who warns.
 */
public final class FallbackWarnings {
    private static final System.Logger LOG = System.getLogger(FallbackWarnings.class.getName());
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    private FallbackWarnings() {
    }

    /** Warns about {@code operator} unless it was warned about before; true when this call warned. */
    public static boolean warnOnce(String operator, String cost) {
        if (!WARNED.add(operator)) {
            return false;
        }
        LOG.log(System.Logger.Level.WARNING, "dtorch: " + operator + " has no sharding strategy yet, so it runs on replicated inputs: "
            + cost + ", and every device computes the whole result (warned once per operator)");
        return true;
    }

    /** The operators warned about so far in this process. */
    public static Set<String> warned() {
        return Set.copyOf(WARNED);
    }
}
