package org.dtorch.core.runtime;

import java.util.function.Consumer;

/**
 * A map from {@code long} keys to values, open addressing with linear probing: no boxed key and no entry
 * object per mapping, so a worker's blob table allocates nothing per operator in its steady state.
 * Removal shifts the following run back, so there are no tombstones.
 *
 * <p>Not thread-safe: one thread owns an instance.
 *
 * @param <V> the value type; null values are not stored
 */
final class LongKeyedMap<V> {
    private static final int INITIAL_CAPACITY = 64;

    private long[] keys = new long[INITIAL_CAPACITY];
    private Object[] values = new Object[INITIAL_CAPACITY];
    private int size;

    /** Maps {@code key} to {@code value}; returns the previous value or null. */
    V put(long key, V value) {
        java.util.Objects.requireNonNull(value, "value");
        if ((size + 1) * 2 > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        for (int i = slot(key, mask); ; i = (i + 1) & mask) {
            if (values[i] == null) {
                keys[i] = key;
                values[i] = value;
                size++;
                return null;
            }
            if (keys[i] == key) {
                @SuppressWarnings("unchecked") V previous = (V) values[i];
                values[i] = value;
                return previous;
            }
        }
    }

    /** The value of {@code key}, or null. */
    @SuppressWarnings("unchecked")
    V get(long key) {
        int mask = keys.length - 1;
        for (int i = slot(key, mask); values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == key) {
                return (V) values[i];
            }
        }
        return null;
    }

    /** Removes {@code key}; returns its value or null. */
    V remove(long key) {
        int mask = keys.length - 1;
        int i = slot(key, mask);
        while (values[i] != null && keys[i] != key) {
            i = (i + 1) & mask;
        }
        if (values[i] == null) {
            return null;
        }
        @SuppressWarnings("unchecked") V removed = (V) values[i];
        values[i] = null;
        size--;
        // Shift back every entry of the run after i whose home slot is not between the hole and itself.
        for (int j = (i + 1) & mask; values[j] != null; j = (j + 1) & mask) {
            int home = slot(keys[j], mask);
            boolean movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
            if (movable) {
                keys[i] = keys[j];
                values[i] = values[j];
                values[j] = null;
                i = j;
            }
        }
        return removed;
    }

    int size() {
        return size;
    }

    boolean isEmpty() {
        return size == 0;
    }

    /** Calls {@code action} on every value. */
    @SuppressWarnings("unchecked")
    void forEachValue(Consumer<? super V> action) {
        for (Object value : values) {
            if (value != null) {
                action.accept((V) value);
            }
        }
    }

    void clear() {
        java.util.Arrays.fill(values, null);
        size = 0;
    }

    private void grow() {
        long[] oldKeys = keys;
        Object[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new Object[oldValues.length * 2];
        size = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldValues[i] != null) {
                @SuppressWarnings("unchecked") V value = (V) oldValues[i];
                put(oldKeys[i], value);
            }
        }
    }

    /** Operand ids are consecutive: spread them with a multiplicative hash. */
    private static int slot(long key, int mask) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }
}
