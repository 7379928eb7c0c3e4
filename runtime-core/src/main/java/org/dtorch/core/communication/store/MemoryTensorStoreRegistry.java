package org.dtorch.core.communication.store;

import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;

/**
 * The process-wide map from store key to the state its instances share (DTorch's
 * {@code MemoryTensorStoreImpManager}). Entries are weak references: a state that no instance reaches any
 * more is collected, and its expired entry is removed on the next {@link #acquire}. Closing the last open
 * instance of a key removes the entry at once and drops the values the state still holds.
 *
 * <p>Thread-safe: all methods synchronize on the class.
 */
final class MemoryTensorStoreRegistry {
    private static final Map<String, WeakReference<MemoryTensorStoreState>> STATES = new HashMap<>();

    private MemoryTensorStoreRegistry() {
    }

    /**
     * The state of {@code storeKey}, created with {@code worldSize} if there is none, with {@code rank} marked
     * open. A rank already open is refused at once: the barrier counts arrivals, so a duplicate would stand in
     * for the missing rank, and the real one would wait until its deadline.
     */
    static synchronized MemoryTensorStoreState acquire(String storeKey, int worldSize, int rank) {
        STATES.values().removeIf(ref -> ref.get() == null);
        WeakReference<MemoryTensorStoreState> ref = STATES.get(storeKey);
        MemoryTensorStoreState state = ref == null ? null : ref.get();
        if (state == null) {
            state = new MemoryTensorStoreState(storeKey, worldSize);
            STATES.put(storeKey, new WeakReference<>(state));
        } else if (state.worldSize != worldSize) {
            throw new IllegalArgumentException("store '" + storeKey + "' already exists with worldSize " + state.worldSize
                + "; this participant asked for worldSize " + worldSize);
        }
        if (state.openRanks[rank]) {
            throw new IllegalStateException("store '" + storeKey + "': rank " + rank + " is already open in this process;"
                + " every participant needs its own rank in [0, " + worldSize + ")");
        }
        state.openRanks[rank] = true;
        state.openInstances++;
        return state;
    }

    /** Releases {@code rank}'s open instance of {@code state}; the last one removes the entry and drops held values. */
    static synchronized void release(MemoryTensorStoreState state, int rank) {
        state.openRanks[rank] = false;
        state.openInstances--;
        if (state.openInstances == 0) {
            WeakReference<MemoryTensorStoreState> ref = STATES.get(state.storeKey);
            if (ref != null && ref.get() == state) {
                STATES.remove(state.storeKey);
            }
            state.clear();
        }
    }

    /** Number of store keys with a reachable state; for tests and diagnostics. */
    static synchronized int liveStoreCount() {
        STATES.values().removeIf(ref -> ref.get() == null);
        return STATES.size();
    }
}
