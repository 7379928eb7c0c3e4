package org.dtorch.core.communication.group;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counts collective calls, one per rank per call, by kind. A {@link ThreadGroupManager} shares one
 * counter among all its groups, so tests can assert how many collectives a redistribution ran.
 *
 * <p>Thread-safe: any rank may record concurrently.
 */
public final class CollectiveCounter {
    private final Map<CollectiveKind, LongAdder> counts = new EnumMap<>(CollectiveKind.class);

    /** A counter at zero. */
    public CollectiveCounter() {
        for (CollectiveKind kind : CollectiveKind.values()) {
            counts.put(kind, new LongAdder());
        }
    }

    void record(CollectiveKind kind) {
        counts.get(kind).increment();
    }

    /** Calls of {@code kind} so far, summed over ranks. */
    public long count(CollectiveKind kind) {
        return counts.get(kind).sum();
    }

    /** Every count, as an immutable snapshot. */
    public Map<CollectiveKind, Long> snapshot() {
        Map<CollectiveKind, Long> copy = new EnumMap<>(CollectiveKind.class);
        counts.forEach((kind, adder) -> copy.put(kind, adder.sum()));
        return Map.copyOf(copy);
    }
}
