package org.dtorch.core.communication.group;

import java.util.Arrays;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Which collectives of a group go round a {@link GlooRing}, and how they get there. Host all-reduces, reduce-scatters
 * and all-gathers of {@value GlooRing#MIN_BYTES} bytes and more of a real number type do, unless the ring is turned
 * off ({@link GlooRing.Options}): the ring reads the input where it lies and writes the result directly, where c10d's
 * Gloo calls copy the input first (and its reduce-scatter and all-gather copy more). Its chunks are the ranks' rows as
 * they lie, so uneven shards need no padding. Smaller collectives cost little to copy and one c10d call has fewer
 * round trips; NCCL groups never take the ring.
 *
 * <p>Each ring collective has one deadline, the group's timeout from its start; the waits' failures are named by the
 * group's {@link C10dErrorTranslator}; results (and the reduce-scatter's partial sums) come from the backend's
 * {@link ResultBufferCache}. A failure closes the result, which nothing may read then.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class GlooRingRoute {
    private final C10dGroup group;
    private final ResultBufferCache results;
    private final GlooRing.Options options;

    GlooRingRoute(C10dGroup group, ResultBufferCache results, GlooRing.Options options) {
        this.group = group;
        this.results = results;
        this.options = options;
    }

    /** True when the all-reduce of {@code input} goes round the ring. */
    boolean takesAllReduce(Tensor input) {
        return !group.isNccl() && options.applies(input, group.size());
    }

    /** True when a reduce-scatter or all-gather of tensors like {@code like}, {@code bytes} in all, goes round the ring. */
    boolean takes(Tensor like, long bytes) {
        return !group.isNccl() && options.applies(like, bytes, group.size());
    }

    /** All-reduces {@code input} into {@code result}, a new buffer of its shape and dtype. */
    void allReduce(String name, Tensor input, Tensor result, ReduceOpType op) {
        onRing(name, result, (ring, deadlineNanos, failures) -> ring.allReduce(input, result, op, deadlineNanos, failures));
    }

    /**
     * The all-gather along {@code dim}: rank r's rows land at their place in one result buffer, no padding, no per-rank
     * pieces, no concatenation. Along another dim the rows are gathered with {@code dim} moved first, and moved back
     * into a contiguous result.
     */
    Tensor allGather(String name, Tensor input, int dim, long[] sizes) {
        try (Tensor moved = dim == 0 ? input.contiguous() : input.movedim(dim, 0).contiguous()) {
            long rowElements = CollectiveShapes.rowElements(moved, 0);
            long[] shape = CollectiveShapes.withDim(TorchTensors.shape(moved), 0, CollectiveShapes.sum(sizes));
            Tensor gathered = results.empty(shape, TorchTensors.dtype(moved));
            onRing(name, gathered, (ring, deadlineNanos, failures) ->
                ring.allGather(moved, gathered, GlooRing.rows(sizes, rowElements), deadlineNanos, failures));
            if (dim == 0) {
                return gathered;
            }
            try (gathered; Tensor back = gathered.movedim(0, dim)) {
                return back.contiguous();
            }
        }
    }

    /** Every rank's equal-shaped {@code input} stacked into a result of shape {@code stacked}: an all-gather of rows of one. */
    Tensor allGatherStacked(Tensor input, long[] stacked) {
        long[] rows = new long[group.size()];
        Arrays.fill(rows, 1);
        try (Tensor one = input.unsqueeze(0); Tensor gathered = allGather("allGatherStacked", one, 0, rows)) {
            return gathered.view(stacked);
        }
    }

    /** The reduce-scatter along dim 0: the partial sums travel through a buffer from the cache when there are more than two ranks. */
    Tensor reduceScatter(Tensor input, long[] sizes, ReduceOpType op) {
        int size = group.size();
        try (Tensor x = input.contiguous(); Tensor work = size > 2 ? results.empty(TorchTensors.shape(x), TorchTensors.dtype(x)) : null) {
            long rowElements = CollectiveShapes.rowElements(x, 0);
            Tensor result = results.empty(CollectiveShapes.withDim(TorchTensors.shape(x), 0, sizes[group.rank()]), TorchTensors.dtype(x));
            onRing("reduceScatterTensor(" + op.shortName() + ")", result, (ring, deadlineNanos, failures) ->
                ring.reduceScatter(x, work, result, GlooRing.rows(sizes, rowElements), op, deadlineNanos, failures));
            return result;
        }
    }

    /** One collective on a {@link GlooRing}: its deadline, and how its waits' failures are named. */
    private interface RingCall {
        void run(GlooRing ring, long deadlineNanos, GlooRing.Failures failures);
    }

    /**
     * Runs {@code call} on a new {@link GlooRing} with one deadline, the group's timeout from now. A failure closes
     * {@code result}, which nothing may read then, and is thrown as a {@link CommException} of {@code name}.
     */
    private void onRing(String name, Tensor result, RingCall call) {
        try {
            group.ensureOpen(name);
            long startNanos = System.nanoTime();
            C10dErrorTranslator errors = group.errors();
            try {
                call.run(new GlooRing(group.pg(), group.rank(), group.size(), options), startNanos + group.timeout().toNanos(),
                    (what, cause) -> errors.translate(name, what, cause, startNanos));
            } catch (CommException e) {
                throw e;
            } catch (RuntimeException e) {
                throw errors.translate(name, e, startNanos);
            }
        } catch (RuntimeException e) {
            result.close();
            throw e;
        }
    }
}
