package org.dtorch.core.communication.group;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

/**
 * A copy of host memory cut into slices over a {@link SliceTeam}: one plain memcpy per slice, each by one thread.
 * The Gloo backend copies an all-reduce's input into its result buffer this way: one thread's memcpy of a large input
 * was most of the gap to Gloo's in-place all-reduce on many cores.
 *
 * <p>How many threads: each of the ranks that copy at once gets an equal {@link #share} of the processors, and each
 * thread at least {@value #MIN_SLICE_BYTES} bytes ({@link #threadsFor}); with fewer processors than ranks (the
 * 2-core VM with 4 ranks) every rank copies alone, as one memcpy, the way it did before.
 *
 * <p>Thread-safe: stateless; any number of threads may copy at once (disjoint targets).
 */
final class HostCopy {
    /** Below this many bytes per thread, handing a slice to a helper costs more than the slice's copy saves. */
    static final long MIN_SLICE_BYTES = 1L << 20;

    private HostCopy() {
    }

    /** Each rank's share of the processors when {@code copiers} ranks of this JVM copy at once; at least 1. */
    static int share(int copiers) {
        return Math.max(1, SliceTeam.PROCESSORS / Math.max(1, copiers));
    }

    /**
     * Threads for a copy of {@code bytes} by a rank whose share of the processors is {@code share}: the share, and no
     * more than one per {@value #MIN_SLICE_BYTES} bytes. {@code forced} (when positive) replaces the share.
     */
    static int threadsFor(long bytes, int share, int forced) {
        int wanted = forced > 0 ? forced : share;
        long bySize = Math.max(1, bytes / MIN_SLICE_BYTES);
        return (int) Math.max(1, Math.min(wanted, bySize));
    }

    /**
     * Copies {@code from} into {@code to} (the same byte size, not overlapping) with {@code threads} threads, the
     * caller one of them. {@code timeout} bounds the wait for the helpers; {@code what} names the copy in a failure.
     */
    static void copy(MemorySegment from, MemorySegment to, int threads, Duration timeout, String what) {
        long bytes = from.byteSize();
        if (to.byteSize() != bytes) {
            throw new IllegalArgumentException(what + ": copy of " + bytes + " bytes into " + to.byteSize());
        }
        // Slices start on 64-byte boundaries (cache lines), so no two threads write one line.
        long lines = (bytes + 63) / 64;
        SliceTeam.run(threads, t -> {
            long start = Math.min(bytes, SliceTeam.sliceStart(lines, threads, t) * 64);
            long end = Math.min(bytes, SliceTeam.sliceStart(lines, threads, t + 1) * 64);
            if (end > start) {
                MemorySegment.copy(from, ValueLayout.JAVA_BYTE, start, to, ValueLayout.JAVA_BYTE, start, end - start);
            }
        }, timeout, what);
    }
}
