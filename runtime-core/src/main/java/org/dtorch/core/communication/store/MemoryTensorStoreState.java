package org.dtorch.core.communication.store;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.DeviceEvent;

/**
 * The state that every {@link MemoryTensorStore} instance of one store key shares (DTorch's
 * {@code MemoryTensorStore::Impl}): live entries by key and the barrier counters, behind one lock.
 *
 * <p>Waiting: a waiter first spins on {@link #version} for up to {@link CommOptions#spinBeforePark()} in
 * all (a hand-off between two running threads then costs microseconds, not a scheduler wake-up), then
 * parks on {@link #changed} until the deadline. Every state change increments {@code version} and signals
 * {@code changed}, both under the lock.
 *
 * <p>Thread-safe: every method takes the lock; {@code version} is volatile so spinners can read it
 * without the lock.
 */
final class MemoryTensorStoreState {
    private static final int KEYS_SHOWN_IN_ERRORS = 8;
    private static final int LOCK_SPINS = 1_000;

    final String storeKey;
    final int worldSize;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private volatile long version;

    /** Live entries by key. Guarded by {@link #lock}. */
    private final Map<String, Entry> entries = new HashMap<>();
    /** Participants waiting in the current barrier generation. Guarded by {@link #lock}. */
    private int barrierArrived;
    /** Completed barrier generations. Guarded by {@link #lock}. */
    private long barrierGeneration;
    /** Open instances sharing this state. Guarded by the registry's lock. */
    int openInstances;
    /** Which ranks have an open instance. Guarded by the registry's lock. */
    final boolean[] openRanks;

    /** One live key. Guarded by the state's lock. */
    private static final class Entry {
        Tensor tensor;
        final DeviceEvent setEvent;
        /** Each consumer's event recorded when it finished; the producer's stream waits on them. */
        final List<DeviceEvent> finishEvents = new ArrayList<>(1);
        final int getCount;
        int gets;
        int finishes;

        Entry(Tensor tensor, DeviceEvent setEvent, int getCount) {
            this.tensor = tensor;
            this.setEvent = setEvent;
            this.getCount = getCount;
        }

        String counts() {
            return "set for " + getCount + " consumer" + (getCount == 1 ? "" : "s") + ", " + gets + " took it, "
                + finishes + " finished";
        }
    }

    MemoryTensorStoreState(String storeKey, int worldSize) {
        this.storeKey = storeKey;
        this.worldSize = worldSize;
        this.openRanks = new boolean[worldSize];
    }

    void srcSet(MemoryTensorStore caller, String key, Tensor ownReference, DeviceEvent setEvent, int getCount) {
        acquire();
        try {
            caller.ensureOpen("srcSet('" + key + "')");
            Entry live = entries.get(key);
            if (live != null) {
                throw new IllegalStateException("srcSet('" + key + "') on store '" + storeKey + "' (rank " + caller.rank()
                    + "): the key is still live (" + live.counts()
                    + "); call srcWaitUntilGetFinished or reset() before setting it again");
            }
            entries.put(key, new Entry(ownReference, setEvent, getCount));
            signalChange();
        } finally {
            lock.unlock();
        }
    }

    /** Takes one of the open gets of {@code key}; returns a new reference and the producer's event. */
    Taken destGet(MemoryTensorStore caller, String key, Deadline deadline) {
        String op = "destGet('" + key + "')";
        acquire();
        try {
            Entry entry = await(caller, op, deadline, () -> {
                Entry e = entries.get(key);
                return e != null && e.gets < e.getCount ? e : null;
            }, () -> {
                Entry e = entries.get(key);
                return e == null ? "no producer set this key" + keysHint()
                    : "the key is " + e.counts() + "; no producer set it again";
            });
            Tensor mine = new Tensor(entry.tensor);
            entry.gets++;
            return new Taken(mine, entry.setEvent);
        } finally {
            lock.unlock();
        }
    }

    record Taken(Tensor tensor, DeviceEvent setEvent) {
    }

    void destFinishGet(MemoryTensorStore caller, String key, DeviceEvent finishEvent) {
        acquire();
        try {
            caller.ensureOpen("destFinishGet('" + key + "')");
            Entry entry = entries.get(key);
            String op = "destFinishGet('" + key + "') on store '" + storeKey + "' (rank " + caller.rank() + ")";
            if (entry == null) {
                throw new IllegalStateException(op + ": no destGet of this key is outstanding (the key is not set)");
            }
            if (entry.finishes >= entry.getCount) {
                throw new IllegalStateException(op + ": more finishes than getCount; the key is " + entry.counts());
            }
            if (entry.finishes >= entry.gets) {
                throw new IllegalStateException(op + ": no destGet of this key is outstanding; the key is " + entry.counts());
            }
            entry.finishes++;
            entry.finishEvents.add(finishEvent);
            if (entry.finishes == entry.getCount) {
                // Every consumer holds its own reference; the store's is no longer needed.
                entry.tensor.close();
                entry.tensor = null;
            }
            signalChange();
        } finally {
            lock.unlock();
        }
    }

    /** Waits until every consumer finished; returns the producer's event and the consumers' finish events. */
    List<DeviceEvent> srcWaitUntilGetFinished(MemoryTensorStore caller, String key, Deadline deadline) {
        String op = "srcWaitUntilGetFinished('" + key + "')";
        acquire();
        try {
            caller.ensureOpen(op);
            Entry entry = entries.get(key);
            if (entry == null) {
                throw new IllegalStateException(op + " on store '" + storeKey + "' (rank " + caller.rank()
                    + "): the key is not live (never set, already waited for, or reset)");
            }
            await(caller, op, deadline, () -> entry.finishes >= entry.getCount ? Boolean.TRUE : null,
                () -> entry.finishes + " of " + entry.getCount + " consumers finished (" + entry.gets + " took the tensor)");
            entries.remove(key, entry);
            signalChange();
            List<DeviceEvent> events = new ArrayList<>(entry.finishEvents.size() + 1);
            events.add(entry.setEvent);
            events.addAll(entry.finishEvents);
            return events;
        } finally {
            lock.unlock();
        }
    }

    void barrier(MemoryTensorStore caller, Deadline deadline) {
        acquire();
        try {
            caller.ensureOpen("barrier()");
            long generation = barrierGeneration;
            barrierArrived++;
            if (barrierArrived == worldSize) {
                barrierArrived = 0;
                barrierGeneration++;
                signalChange();
                return;
            }
            try {
                await(caller, "barrier()", deadline, () -> barrierGeneration != generation ? Boolean.TRUE : null,
                    () -> barrierArrived + " of " + worldSize + " ranks arrived");
            } catch (RuntimeException e) {
                if (barrierGeneration == generation) {
                    barrierArrived--; // withdraw, so the barrier stays usable for the others
                }
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Drops every entry and the store's references to their values. */
    void clear() {
        acquire();
        try {
            for (Entry e : entries.values()) {
                if (e.tensor != null) {
                    e.tensor.close();
                    e.tensor = null;
                }
            }
            entries.clear();
            signalChange();
        } finally {
            lock.unlock();
        }
    }

    /** Wakes the waiters of a closing instance so they notice. */
    void wakeAll() {
        acquire();
        try {
            signalChange();
        } finally {
            lock.unlock();
        }
    }

    /** Number of live keys; for tests and diagnostics. */
    int liveKeyCount() {
        acquire();
        try {
            return entries.size();
        } finally {
            lock.unlock();
        }
    }

    /** Number of values the store still references; for tests and diagnostics. */
    int heldTensorCount() {
        acquire();
        try {
            return (int) entries.values().stream().filter(e -> e.tensor != null).count();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Takes the lock, spinning briefly first: the holder only ever keeps it for a few map operations,
     * and a plain {@code lock()} that finds it held parks the thread, which costs a scheduler wake-up.
     */
    private void acquire() {
        for (int spins = 0; spins < LOCK_SPINS; spins++) {
            if (lock.tryLock()) {
                return;
            }
            Thread.onSpinWait();
        }
        lock.lock();
    }

    private void signalChange() {
        version++;
        changed.signalAll();
    }

    private String keysHint() {
        if (entries.isEmpty()) {
            return " (no keys are live)";
        }
        List<String> keys = new ArrayList<>(entries.keySet());
        keys.sort(null);
        String shown = String.join("', '", keys.subList(0, Math.min(KEYS_SHOWN_IN_ERRORS, keys.size())));
        return " (live keys: '" + shown + "'" + (keys.size() > KEYS_SHOWN_IN_ERRORS ? ", ..." : "") + ")";
    }

    /**
     * Waits, with the lock held, until {@code attempt} returns non-null. Spins without the lock while the
     * spin budget lasts (re-checking after every change), then parks until a change or the deadline.
     */
    private <T> T await(MemoryTensorStore caller, String op, Deadline deadline, Supplier<T> attempt, Supplier<String> seen) {
        long spinEnd = System.nanoTime() + caller.spinNanos();
        while (true) {
            T result = attempt.get();
            if (result != null) {
                return result;
            }
            caller.ensureOpen(op);
            long remaining = deadline.remainingNanos();
            if (remaining <= 0) {
                throw new CommTimeoutException(op + " on store '" + storeKey + "' (rank " + caller.rank() + ") "
                    + deadline.timedOutAfter() + ": " + seen.get());
            }
            if (System.nanoTime() - spinEnd < 0) {
                long seenVersion = version;
                lock.unlock();
                try {
                    while (version == seenVersion && System.nanoTime() - spinEnd < 0) {
                        Thread.onSpinWait();
                    }
                } finally {
                    acquire();
                }
                continue;
            }
            try {
                changed.awaitNanos(remaining);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommInterruptedException(op + " on store '" + storeKey + "' (rank " + caller.rank()
                    + ") was interrupted: " + seen.get(), e);
            }
        }
    }
}
