package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;

/**
 * Atomic and plain access to words of a shared mapping, with the memory ordering in the name: a
 * {@code putIntRelease} is read by a {@code getIntAcquire}; {@code casInt} and {@code getAndAddInt} are full
 * fences. Offsets must be aligned to the size of the word.
 *
 * <p>Thread-safe: stateless; the caller owns the protocol.
 */
public final class Shm {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private Shm() {
    }

    public static int getIntAcquire(MemorySegment s, long offset) {
        return (int) INT.getAcquire(s, offset);
    }

    public static int getIntVolatile(MemorySegment s, long offset) {
        return (int) INT.getVolatile(s, offset);
    }

    public static void putIntRelease(MemorySegment s, long offset, int value) {
        INT.setRelease(s, offset, value);
    }

    public static void putIntVolatile(MemorySegment s, long offset, int value) {
        INT.setVolatile(s, offset, value);
    }

    public static boolean casInt(MemorySegment s, long offset, int expected, int value) {
        return INT.compareAndSet(s, offset, expected, value);
    }

    public static int getAndSetInt(MemorySegment s, long offset, int value) {
        return (int) INT.getAndSet(s, offset, value);
    }

    public static int getAndAddInt(MemorySegment s, long offset, int delta) {
        return (int) INT.getAndAdd(s, offset, delta);
    }

    public static long getLongAcquire(MemorySegment s, long offset) {
        return (long) LONG.getAcquire(s, offset);
    }

    public static void putLongRelease(MemorySegment s, long offset, long value) {
        LONG.setRelease(s, offset, value);
    }

    public static long getAndAddLong(MemorySegment s, long offset, long delta) {
        return (long) LONG.getAndAdd(s, offset, delta);
    }

    /** Writes {@code text} as a length (int) and UTF-8 bytes, truncated to {@code capacity - 4} bytes. */
    public static void putString(MemorySegment s, long offset, int capacity, String text) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        int length = Math.min(bytes.length, capacity - 4);
        MemorySegment.copy(bytes, 0, s, ValueLayout.JAVA_BYTE, offset + 4, length);
        s.set(ValueLayout.JAVA_INT, offset, length);
    }

    /** Reads a string written by {@link #putString}. */
    public static String getString(MemorySegment s, long offset) {
        int length = s.get(ValueLayout.JAVA_INT, offset);
        byte[] bytes = new byte[length];
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, offset + 4, bytes, 0, length);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
