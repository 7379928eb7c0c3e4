package org.dtorch.core.communication.group;

import java.time.Duration;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.ReduceOpType;

/**
 * The host all-reduce of the same-device backend: N tensors in one address space reduced in parallel over
 * disjoint slices, each slice by one thread, with libtorch's own kernels on views (no per-element Java).
 * A thread walks its slice in cache-sized pieces: it combines the N inputs into the first output and copies
 * that piece, still in cache, into the other outputs, so every input is read once and every output written
 * once (docs/communication-core.md, "Collective speed").
 *
 * <p>Pieces stay under libtorch's intra-op grain (32768 elements), so a kernel never starts a parallel team
 * of its own from inside one of these threads.
 *
 * <p>Sizing: {@value #CHUNK_BYTES_PER_THREAD_PROPERTY} bytes of one input per thread (default
 * {@value #DEFAULT_CHUNK_BYTES_PER_THREAD}), at most one thread per available processor; the calling thread is
 * one of them; the helpers are {@link SliceTeam}'s.
 *
 * <p>Thread-safe: any number of ranks may reduce at once; they share one pool of helper threads.
 */
final class HostReduction {
    /** System property: bytes of one input each thread reduces, at least; fewer bytes use fewer threads. */
    static final String CHUNK_BYTES_PER_THREAD_PROPERTY = "dtorch.sameDevice.chunkBytesPerThread";
    static final long DEFAULT_CHUNK_BYTES_PER_THREAD = 1L << 20;
    /** Bytes of one input combined at a time: the piece and its copies stay in L2. */
    private static final long PIECE_BYTES = 128 * 1024;
    /** libtorch runs a kernel of this many elements or more on its intra-op pool; pieces stay below. */
    private static final long INTRA_OP_GRAIN = 32768;
    private static final long CHUNK_BYTES_PER_THREAD = chunkBytesPerThread();

    private HostReduction() {
    }

    /** How many threads reduce {@code bytes} bytes per input. */
    static int threadsFor(long bytes) {
        long wanted = Math.max(1, bytes / Math.max(1, CHUNK_BYTES_PER_THREAD));
        return (int) Math.min(SliceTeam.PROCESSORS, wanted);
    }

    /**
     * {@code outs[r] = op(ins[0], ..., ins[n-1])} for every r, element-wise; all tensors contiguous, of one
     * shape and dtype, on the host. {@code timeout} bounds the wait for the helper threads.
     */
    static void allReduce(Tensor[] ins, Tensor[] outs, ReduceOpType op, Duration timeout) {
        long numel = ins[0].numel();
        int threads = threadsFor(ins[0].nbytes());
        SliceTeam.run(threads, t -> {
            long start = SliceTeam.sliceStart(numel, threads, t);
            reduceRange(ins, outs, start, SliceTeam.sliceStart(numel, threads, t + 1) - start, op);
        }, timeout, "same-device all-reduce: the host reduction");
    }

    /** Reduces elements [start, start + count) of every input into every output, piece by piece. */
    private static void reduceRange(Tensor[] ins, Tensor[] outs, long start, long count, ReduceOpType op) {
        int n = ins.length;
        long piece = Math.max(1, Math.min(INTRA_OP_GRAIN - 1, PIECE_BYTES / ins[0].element_size()));
        Tensor[] flatIns = new Tensor[n];
        Tensor[] flatOuts = new Tensor[n];
        try (Scalar divisor = new Scalar((double) n)) {
            for (int r = 0; r < n; r++) {
                flatIns[r] = ins[r].view(-1);
                flatOuts[r] = outs[r].view(-1);
            }
            for (long pos = start; pos < start + count; pos += piece) {
                long len = Math.min(piece, start + count - pos);
                try (Tensor acc = flatOuts[0].narrow(0, pos, len)) {
                    try (Tensor a = flatIns[0].narrow(0, pos, len); Tensor b = flatIns[1].narrow(0, pos, len)) {
                        SameDeviceBackend.combineOut(acc, a, b, op);
                    }
                    for (int r = 2; r < n; r++) {
                        try (Tensor next = flatIns[r].narrow(0, pos, len)) {
                            SameDeviceBackend.combine(acc, next, op);
                        }
                    }
                    if (op == ReduceOpType.AVG) {
                        acc.div_(divisor);
                    }
                    for (int r = 1; r < n; r++) {
                        try (Tensor dst = flatOuts[r].narrow(0, pos, len)) {
                            dst.copy_(acc);
                        }
                    }
                }
            }
        } finally {
            for (int r = 0; r < n; r++) {
                if (flatIns[r] != null) {
                    flatIns[r].close();
                }
                if (flatOuts[r] != null) {
                    flatOuts[r].close();
                }
            }
        }
    }

    private static long chunkBytesPerThread() {
        String text = System.getProperty(CHUNK_BYTES_PER_THREAD_PROPERTY);
        if (text == null || text.isBlank()) {
            return DEFAULT_CHUNK_BYTES_PER_THREAD;
        }
        try {
            long value = Long.parseLong(text.strip());
            if (value >= 1) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("system property " + CHUNK_BYTES_PER_THREAD_PROPERTY + " must be a positive whole number of bytes, got '"
            + text + "'");
    }
}
