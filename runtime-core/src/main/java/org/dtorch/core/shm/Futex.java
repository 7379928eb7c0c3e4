package org.dtorch.core.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * Linux futexes on 32-bit words of shared mappings, through {@code syscall(SYS_futex, ...)}: a thread in
 * any process that maps the word sleeps in the kernel until another one changes the word and wakes it.
 * Shared (not private) futexes, so processes meet on the same physical page.
 *
 * <p>Thread-safe: stateless.
 */
public final class Futex {
    private static final long SYS_FUTEX = 202; // x86_64
    private static final int FUTEX_WAIT = 0;
    private static final int FUTEX_WAKE = 1;
    private static final int EAGAIN = 11;
    private static final int EINTR = 4;
    private static final int ETIMEDOUT = 110;

    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final StructLayout TIMESPEC = MemoryLayout.structLayout(ValueLayout.JAVA_LONG.withName("tv_sec"),
        ValueLayout.JAVA_LONG.withName("tv_nsec"));
    private static final MethodHandle SYSCALL;

    static {
        Linker linker = Linker.nativeLinker();
        SYSCALL = linker.downcallHandle(linker.defaultLookup().find("syscall").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT),
            Linker.Option.firstVariadicArg(1), Linker.Option.captureCallState("errno"));
    }

    private Futex() {
    }

    /** Why {@link #await} returned. */
    public enum Wake {
        /** Woken by {@link #wake}, or the word no longer held the expected value. */
        CHANGED,
        /** The timeout passed. */
        TIMED_OUT,
        /** A signal interrupted the sleep; re-check and wait again. */
        INTERRUPTED
    }

    /**
     * Sleeps while the int at {@code offset} of {@code segment} equals {@code expected}, up to
     * {@code timeoutNanos}.
     */
    public static Wake await(MemorySegment segment, long offset, int expected, long timeoutNanos) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment timeout = arena.allocate(TIMESPEC);
            long nanos = Math.max(0, timeoutNanos);
            timeout.set(ValueLayout.JAVA_LONG, 0, nanos / 1_000_000_000L);
            timeout.set(ValueLayout.JAVA_LONG, 8, nanos % 1_000_000_000L);
            long result = (long) SYSCALL.invokeExact(state, SYS_FUTEX, segment.asSlice(offset, 4), FUTEX_WAIT, expected, timeout,
                MemorySegment.NULL, 0);
            if (result == 0) {
                return Wake.CHANGED;
            }
            int errno = (int) ERRNO.get(state, 0L);
            return switch (errno) {
                case EAGAIN -> Wake.CHANGED;
                case ETIMEDOUT -> Wake.TIMED_OUT;
                case EINTR -> Wake.INTERRUPTED;
                default -> throw new IllegalStateException("futex wait failed: errno " + errno);
            };
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("futex wait failed", t);
        }
    }

    /** Wakes up to {@code count} sleepers on the int at {@code offset}; returns how many woke. */
    public static int wake(MemorySegment segment, long offset, int count) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            long result = (long) SYSCALL.invokeExact(state, SYS_FUTEX, segment.asSlice(offset, 4), FUTEX_WAKE, count,
                MemorySegment.NULL, MemorySegment.NULL, 0);
            if (result < 0) {
                throw new IllegalStateException("futex wake failed: errno " + (int) ERRNO.get(state, 0L));
            }
            return (int) result;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("futex wake failed", t);
        }
    }

    /** Wakes every sleeper on the int at {@code offset}. */
    public static void wakeAll(MemorySegment segment, long offset) {
        wake(segment, offset, Integer.MAX_VALUE);
    }
}
