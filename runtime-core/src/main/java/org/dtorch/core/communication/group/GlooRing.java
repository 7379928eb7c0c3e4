package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The Gloo backend's all-reduce, reduce-scatter and all-gather of large host tensors into new results, without the
 * copies c10d's Gloo calls make ({@code docs/adr/0035-gloo-ring-reads-its-input-in-place.md}): a ring of c10d sends
 * and receives that reads the input where it lies and writes the result directly. {@code ProcessGroupGloo.allreduce}
 * works in place only, so a result in a new tensor costs one copy of the input per rank, and its out-of-place
 * reduce-scatter and all-gather clone or gather into fresh tensors and copy out again. This ring moves the bytes
 * Gloo's own ring moves and reduces in place in the result with libtorch's kernels ({@code add_} and its kin), so the
 * all-reduce costs what the in-place call costs (measured: 1.07 of it on 2 cores, 1.06 on 16).
 *
 * <p>The whole is cut into one chunk per rank (element offsets {@code bounds}: the balanced split for the all-reduce,
 * the ranks' rows otherwise) and each chunk into segments of about {@link Options#segmentBytes} bytes. Step {@code j}
 * of {@code 2 (n - 1)} sends chunk {@code rank - j - 1} to the next rank and receives chunk {@code rank - j - 2} from
 * the previous one, always where the bytes belong. In the first {@code n - 1} steps what arrives is a partial
 * reduction, and the input's own chunk is combined into it where it landed (the last of these steps finishes chunk
 * {@code rank}, and divides it for AVG); in the others it is a finished chunk. The all-reduce is the whole ring, the
 * reduce-scatter its first half, the all-gather its second. No scratch is needed: the regions a step receives into
 * are not read by any send still pending. Each segment moves to its next step as soon as it is done, so one segment
 * is reduced while the next is on the wire. Every rank ends with the chunks their owners finished, so the ranks'
 * results are equal bit for bit.
 *
 * <p>Every wait is bounded by what is left of the group's timeout, counted from the start of the collective. On a
 * failure every send and receive still pending is dropped (closing a c10d {@code Work} drops its Gloo buffer; until
 * then it holds the tensors it reads or writes), so nothing writes into the result after the call has returned.
 *
 * <p>Not thread-safe: one rank's backend uses an instance.
 */
final class GlooRing {
    /**
     * System property: {@code true} (the default) sends large host all-reduces, reduce-scatters and all-gathers round
     * the ring; {@code false} calls c10d's own Gloo collectives (the all-reduce after a copy into its result).
     */
    static final String RING_PROPERTY = "dtorch.gloo.ring";
    /** System property: bytes per segment, at least 4096; default {@value #DEFAULT_SEGMENT_BYTES}. */
    static final String SEGMENT_BYTES_PROPERTY = "dtorch.gloo.ringSegmentBytes";
    /**
     * Measured best of 2 to 16 segments per 16 MiB chunk on 2 and on 16 cores: one segment leaves no overlap of
     * reduction and transfer, many cost a round each.
     */
    static final long DEFAULT_SEGMENT_BYTES = 4L << 20;
    /** Smaller collectives call c10d's Gloo once: their copies are cheap, and the ring is 2 (n - 1) round trips. */
    static final long MIN_BYTES = 1L << 20;
    /** At most this many segments per chunk: each is a send and a receive per step. */
    static final int MAX_SEGMENTS = 16;
    /** The c10d tag of the ring's messages, apart from the user's sends and receives (tag 0). */
    static final int TAG = 1;

    /**
     * Whether the ring is used, and its segment size.
     *
     * @param enabled      false when {@value #RING_PROPERTY} is {@code false}
     * @param segmentBytes bytes per segment of a chunk
     */
    record Options(boolean enabled, long segmentBytes) {
        Options {
            if (segmentBytes < 4096) {
                throw new IllegalArgumentException(SEGMENT_BYTES_PROPERTY + " must be at least 4096 bytes, got " + segmentBytes);
            }
        }

        /** The options of this JVM's system properties. */
        static Options fromSystemProperties() {
            String ring = System.getProperty(RING_PROPERTY, "true").strip();
            if (!ring.equals("true") && !ring.equals("false")) {
                throw new IllegalArgumentException("system property " + RING_PROPERTY + " must be 'true' or 'false', got '" + ring + "'");
            }
            String text = System.getProperty(SEGMENT_BYTES_PROPERTY);
            long segmentBytes = DEFAULT_SEGMENT_BYTES;
            if (text != null && !text.isBlank()) {
                try {
                    segmentBytes = Long.parseLong(text.strip());
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("system property " + SEGMENT_BYTES_PROPERTY + " must be a whole number of bytes, got '"
                        + text + "'", e);
                }
            }
            return new Options(ring.equals("true"), segmentBytes);
        }

        /**
         * True when the ring all-reduces {@code input} over {@code size} ranks: enabled, two ranks or more, a contiguous
         * host tensor of at least {@value #MIN_BYTES} bytes, of a real number type.
         */
        boolean applies(Tensor input, int size) {
            return input.is_contiguous() && applies(input, input.nbytes(), size);
        }

        /**
         * True when a reduce-scatter or all-gather of host tensors like {@code like} over {@code size} ranks, whose
         * whole (all chunks) is {@code bytes} bytes, goes round the ring: enabled, two ranks or more, at least
         * {@value #MIN_BYTES} bytes, a real number type. Its caller makes the tensors contiguous.
         */
        boolean applies(Tensor like, long bytes, int size) {
            return enabled && size >= 2 && !like.is_cuda() && bytes >= MIN_BYTES && ringType(TorchTensors.dtype(like));
        }

        /** Segments per chunk of {@code chunkBytes}: about {@link #segmentBytes} each, 1 to {@value #MAX_SEGMENTS}. */
        int segments(long chunkBytes) {
            return (int) Math.max(1, Math.min(MAX_SEGMENTS, Math.round((double) chunkBytes / segmentBytes)));
        }
    }

    /** Float, integer and byte types: sent as raw bytes and combined by libtorch like Gloo combines them. */
    private static boolean ringType(ScalarType dtype) {
        return switch (dtype) {
            case Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long -> true;
            default -> false;
        };
    }

    /** Names a failure of one wait: the c10d error as a {@code CommException} of the backend. */
    interface Failures {
        RuntimeException translate(String what, RuntimeException cause);
    }

    private final Backend pg;
    private final int rank;
    private final int size;
    private final Options options;
    private final int next;
    private final int previous;

    /** Rank {@code rank} of {@code size} on {@code pg}, cutting chunks into segments as {@code options} say. */
    GlooRing(Backend pg, int rank, int size, Options options) {
        this.pg = pg;
        this.options = options;
        this.rank = rank;
        this.size = size;
        this.next = (rank + 1) % size;
        this.previous = (rank + size - 1) % size;
    }

    /** Element offsets of {@code size} chunks of the balanced split of {@code numel}: {@code size + 1} of them. */
    static long[] balanced(long numel, int size) {
        long[] bounds = new long[size + 1];
        for (int c = 0; c <= size; c++) {
            bounds[c] = SliceTeam.sliceStart(numel, size, c);
        }
        return bounds;
    }

    /** Element offsets of chunks of {@code rows[c]} rows of {@code rowElements} elements each: {@code rows.length + 1} of them. */
    static long[] rows(long[] rows, long rowElements) {
        long[] bounds = new long[rows.length + 1];
        for (int c = 0; c < rows.length; c++) {
            bounds[c + 1] = bounds[c] + rows[c] * rowElements;
        }
        return bounds;
    }

    /**
     * Writes the element-wise {@code op} of every rank's {@code input} into {@code result}, leaving {@code input} alone.
     * {@code result} is contiguous, shaped and typed like the input. Every wait ends by {@code deadlineNanos} ({@code
     * System.nanoTime()}); {@code failures} turns a c10d error of a wait into the backend's exception, given the step
     * and peer it waited for.
     */
    void allReduce(Tensor input, Tensor result, ReduceOpType op, long deadlineNanos, Failures failures) {
        try (Tensor in = input.view(-1); Tensor out = result.view(-1)) {
            Place input0 = new Place(in, 0);
            Place result0 = new Place(out, 0);
            run(0, 2 * (size - 1), in, j -> j == 0 ? input0 : result0, j -> result0, balanced(in.numel(), size), op, deadlineNanos,
                failures);
        }
    }

    /**
     * Writes into {@code result} the element-wise {@code op} of every rank's chunk {@code rank} of {@code input}, whose
     * chunks lie at the element offsets {@code bounds}; {@code work} (contiguous, typed and sized like the input;
     * unused, and may be null, with two ranks) holds the partial reductions of the other chunks on their way round.
     * The first {@code n - 1} steps of {@link #allReduce}'s ring, whose last step lands in {@code result}.
     */
    void reduceScatter(Tensor input, Tensor work, Tensor result, long[] bounds, ReduceOpType op, long deadlineNanos, Failures failures) {
        try (Tensor in = input.view(-1); Tensor partial = size > 2 ? work.view(-1) : null; Tensor mine = result.view(-1)) {
            Place input0 = new Place(in, 0);
            Place work0 = new Place(partial, 0); // two ranks: the only step sends the input and receives into the result
            Place own = new Place(mine, bounds[rank]);
            run(0, size - 1, in, j -> j == 0 ? input0 : work0, j -> j == size - 2 ? own : work0, bounds, op, deadlineNanos, failures);
        }
    }

    /**
     * Gathers every rank's {@code input} into {@code result} at the element offsets {@code bounds} (chunk {@code c} is
     * rank {@code c}'s input); this rank's own chunk is copied first. The last {@code n - 1} steps of {@link #allReduce}'s
     * ring.
     */
    void allGather(Tensor input, Tensor result, long[] bounds, long deadlineNanos, Failures failures) {
        try (Tensor in = input.view(-1); Tensor out = result.view(-1);
             Tensor own = out.narrow(0, bounds[rank], bounds[rank + 1] - bounds[rank])) {
            own.copy_(in);
            Place mine = new Place(in, bounds[rank]);
            Place result0 = new Place(out, 0);
            run(size - 1, 2 * (size - 1), null, j -> j == size - 1 ? mine : result0, j -> result0, bounds, ReduceOpType.SUM,
                deadlineNanos, failures);
        }
    }

    /**
     * A flat tensor holding the elements from {@code origin} on of the whole the chunks' bounds describe: the whole
     * ({@code origin} 0), or one chunk of it held apart.
     */
    private record Place(Tensor flat, long origin) {
        Tensor narrow(long start, long count) {
            return flat.narrow(0, start - origin, count);
        }
    }

    /** Where step {@code j} reads what it sends, or writes what it receives. */
    private interface Ends {
        Place at(int j);
    }

    /**
     * Steps {@code [first, last)} of the ring of {@code 2 (n - 1)} steps: step {@code j} sends chunk {@code rank - j - 1}
     * to the next rank and receives chunk {@code rank - j - 2} from the previous one, segment by segment, each segment
     * going on to its next step as soon as it is done. In the first {@code n - 1} steps what arrives is a partial
     * reduction, and {@code in}'s own chunk is combined into it where it landed (the last of them finishes the chunk
     * this rank owns, chunk {@code rank}, and divides it for AVG); in the others it is a finished chunk.
     */
    private void run(int first, int last, Tensor in, Ends sendFrom, Ends receiveInto, long[] bounds, ReduceOpType op, long deadlineNanos,
                     Failures failures) {
        int segments = options.segments(largestChunk(bounds) * receiveInto.at(first).flat().element_size());
        int steps = last - first;
        Flows flows = new Flows(first, steps, segments);
        try (Scalar divisor = new Scalar((double) size)) {
            for (int s = 0; s < segments; s++) {
                post(flows, first, s, sendFrom, receiveInto, bounds, segments);
            }
            for (int j = first; j < last; j++) {
                int chunk = receiveChunk(j);
                long chunkLength = bounds[chunk + 1] - bounds[chunk];
                Place into = receiveInto.at(j);
                for (int s = 0; s < segments; s++) {
                    long segmentStart = bounds[chunk] + SliceTeam.sliceStart(chunkLength, segments, s);
                    long length = bounds[chunk] + SliceTeam.sliceStart(chunkLength, segments, s + 1) - segmentStart;
                    int step = j;
                    await(flows.receive(j, s), deadlineNanos, failures,
                        () -> "ring step " + flows.step(step) + ": the receive of chunk " + chunk + " from rank " + previous);
                    if (j < size - 1 && length > 0) {
                        try (Tensor acc = into.narrow(segmentStart, length); Tensor mine = in.narrow(0, segmentStart, length)) {
                            SameDeviceBackend.combine(acc, mine, op);
                            if (j == size - 2 && op == ReduceOpType.AVG) {
                                acc.div_(divisor);
                            }
                        }
                    }
                    if (j + 1 < last) {
                        post(flows, j + 1, s, sendFrom, receiveInto, bounds, segments);
                    }
                }
            }
            for (int j = first; j < last; j++) {
                int chunk = sendChunk(j);
                for (int s = 0; s < segments; s++) {
                    int step = j;
                    await(flows.send(j, s), deadlineNanos, failures,
                        () -> "ring step " + flows.step(step) + ": the send of chunk " + chunk + " to rank " + next);
                }
            }
        } finally {
            flows.close();
        }
    }

    /** Elements of the largest chunk. */
    private static long largestChunk(long[] bounds) {
        long largest = 0;
        for (int c = 0; c + 1 < bounds.length; c++) {
            largest = Math.max(largest, bounds[c + 1] - bounds[c]);
        }
        return largest;
    }

    private int sendChunk(int j) {
        return Math.floorMod(rank - j - 1, size);
    }

    private int receiveChunk(int j) {
        return Math.floorMod(rank - j - 2, size);
    }

    /** Issues step {@code j}'s receive and send of segment {@code s}; an empty segment moves nothing. */
    private void post(Flows flows, int j, int s, Ends sendFrom, Ends receiveInto, long[] bounds, int segments) {
        Tensor into = segment(receiveInto.at(j), bounds, receiveChunk(j), s, segments);
        if (into != null) {
            flows.keep(into);
            try (TensorVector one = new TensorVector(into)) {
                flows.receives[j - flows.first][s] = flows.keep(pg.recv(one, previous, TAG));
            }
        }
        Tensor from = segment(sendFrom.at(j), bounds, sendChunk(j), s, segments);
        if (from != null) {
            flows.keep(from);
            try (TensorVector one = new TensorVector(from)) {
                flows.sends[j - flows.first][s] = flows.keep(pg.send(one, next, TAG));
            }
        }
    }

    /** Segment {@code s} of chunk {@code chunk} at {@code place}, or null when it is empty. */
    private static Tensor segment(Place place, long[] bounds, int chunk, int s, int segments) {
        long length = bounds[chunk + 1] - bounds[chunk];
        long start = SliceTeam.sliceStart(length, segments, s);
        long count = SliceTeam.sliceStart(length, segments, s + 1) - start;
        return count == 0 ? null : place.narrow(bounds[chunk] + start, count);
    }

    /** Waits for {@code work} until {@code deadlineNanos}; a failure is translated with {@code what} it waited for. */
    private static void await(Work work, long deadlineNanos, Failures failures, Supplier<String> what) {
        if (work == null) {
            return; // an empty segment
        }
        long leftMillis = Math.max(1, (deadlineNanos - System.nanoTime() + 999_999) / 1_000_000);
        boolean completed;
        try (Milliseconds left = new Milliseconds(leftMillis)) {
            completed = work._wait(left);
        } catch (RuntimeException e) {
            throw failures.translate(what.get(), e);
        }
        if (!completed) { // Gloo's buffer was aborted: nothing arrived, or nothing left
            throw failures.translate(what.get(), new IllegalStateException("the transfer was aborted before it completed"));
        }
    }

    /** The sends and receives of one ring, and every native handle made for them; closed together. */
    private static final class Flows implements AutoCloseable {
        final Work[][] sends;
        final Work[][] receives;
        /** The ring step of index 0 here. */
        final int first;
        private final int steps;
        private final List<AutoCloseable> handles = new ArrayList<>();

        Flows(int first, int steps, int segments) {
            this.first = first;
            this.steps = steps;
            this.sends = new Work[steps][segments];
            this.receives = new Work[steps][segments];
        }

        /** Step {@code j}'s receive of segment {@code s}, or null when the segment is empty. */
        Work receive(int j, int s) {
            return receives[j - first][s];
        }

        /** Step {@code j}'s send of segment {@code s}, or null when the segment is empty. */
        Work send(int j, int s) {
            return sends[j - first][s];
        }

        <T extends AutoCloseable> T keep(T handle) {
            handles.add(handle);
            return handle;
        }

        String step(int j) {
            return (j - first + 1) + " of " + steps;
        }

        /** Closes the work first (a pending send or receive is dropped with it), then the views it used. */
        @Override
        public void close() {
            for (AutoCloseable handle : handles) {
                if (handle instanceof Work work) {
                    work.close();
                }
            }
            for (AutoCloseable handle : handles) {
                if (!(handle instanceof Work)) {
                    try {
                        handle.close();
                    } catch (Exception e) {
                        throw new IllegalStateException("closing a ring view", e);
                    }
                }
            }
        }
    }
}
