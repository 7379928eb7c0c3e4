package org.dtorch.ops.aten;

/**
 * Where one schema parameter's value comes from in a call: a positional or keyword argument (its index in the call's
 * values, positionals first, then keyword values in the order of the signature key), several trailing ints packed into
 * an int list ({@code t.view(2, 3)}), or the schema's default ({@link #DEFAULT}).
 *
 * @param index the first value's index, or -1 for the default
 * @param count how many values (more than one only when packed)
 * @param kind  the value's {@link ArgKind}, {@code *i} when packed, empty for the default
 *
 * <p>Immutable, so thread-safe.
 */
public record ArgSource(int index, int count, String kind) {
    /** The schema's default value. */
    public static final ArgSource DEFAULT = new ArgSource(-1, 0, "");

    static ArgSource positional(int index, String kind) {
        return new ArgSource(index, 1, kind);
    }

    static ArgSource keyword(int index, String kind) {
        return new ArgSource(index, 1, kind);
    }

    static ArgSource packed(int from, int count) {
        return new ArgSource(from, count, "*i");
    }

    /** True when the value is the schema's default. */
    public boolean isDefault() {
        return index < 0;
    }

    /** True when several trailing ints fill an int list. */
    public boolean isPacked() {
        return count > 1 || kind.equals("*i");
    }
}
