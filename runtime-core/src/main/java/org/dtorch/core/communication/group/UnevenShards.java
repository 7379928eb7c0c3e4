package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;

/**
 * How uneven shards travel through c10d's collectives, which move equal-sized buffers. Shards are rows along dim 0
 * here (callers move the sharded dim first), their sizes from the balanced split, so the largest is at most one row
 * longer than the others and padding costs at most one row per rank:
 * <pre>
 *   reduce-scatter input  [ r0 r0 | r1 r1 | r2 ]       -&gt;  [ r0 r0 | r1 r1 | r2 0 ]      ({@link #padEach})
 *   all-gather input      [ r2 ]                       -&gt;  [ r2 0 ]                       ({@link #padTo})
 *   all-gather result     [ r0 r0 | r1 r1 | r2 0 ]     -&gt;  r0 r0, r1 r1, r2               ({@link #trim})
 * </pre>
 * An all-to-all needs no padding: it sends flattened per-peer chunks with split sizes ({@link #sendSplits},
 * {@link #receiveSplits}), so unequal shapes on both dims travel as they are.
 *
 * <p>Thread-safe: stateless.
 */
final class UnevenShards {

    private UnevenShards() {
    }

    /**
     * {@code x} laid out for a reduce-scatter of {@code max} rows per rank: {@code x} holds every rank's rows in rank
     * order along dim 0 ({@code sizes[r]} of rank r), and the result holds rank r's rows at {@code r * max} of a new
     * zeroed tensor of {@code max * sizes.length} rows. Returns {@code x} itself when the sizes are equal; otherwise the
     * caller owns the new tensor.
     */
    static Tensor padEach(Tensor x, long[] sizes) {
        if (CollectiveShapes.allEqual(sizes)) {
            return x;
        }
        long max = CollectiveShapes.max(sizes);
        long[] offsets = CollectiveShapes.offsets(sizes);
        Tensor padded = x.new_zeros(CollectiveShapes.withDim(x, 0, max * sizes.length));
        try {
            for (int r = 0; r < sizes.length; r++) {
                try (Tensor dst = padded.narrow(0, r * max, sizes[r]); Tensor src = x.narrow(0, offsets[r], sizes[r])) {
                    dst.copy_(src);
                }
            }
        } catch (RuntimeException e) {
            padded.close();
            throw e;
        }
        return padded;
    }

    /**
     * {@code x}, of {@code max} rows or fewer along dim 0, zero-padded at its end to {@code max} rows. Returns {@code x}
     * itself when it has {@code max} rows; otherwise the caller owns the new tensor.
     */
    static Tensor padTo(Tensor x, long max) {
        if (x.size(0) == max) {
            return x;
        }
        Tensor padded = x.new_zeros(CollectiveShapes.withDim(x, 0, max));
        try (Tensor head = padded.narrow(0, 0, x.size(0))) {
            head.copy_(x);
        } catch (RuntimeException e) {
            padded.close();
            throw e;
        }
        return padded;
    }

    /**
     * Every rank's rows of {@code gathered}, which holds {@code max} rows per rank in rank order: views of it, rank r's
     * of {@code sizes[r]} rows, in rank order. The caller owns the views.
     */
    static List<Tensor> trim(Tensor gathered, long[] sizes) {
        long max = CollectiveShapes.max(sizes);
        List<Tensor> pieces = new ArrayList<>(sizes.length);
        for (int r = 0; r < sizes.length; r++) {
            pieces.add(gathered.narrow(0, r * max, sizes[r]));
        }
        return pieces;
    }

    /**
     * Elements an all-to-all sends to each rank from an input of {@code shape}: rank r gets its {@code destSizes[r]}
     * indices of {@code destDim}, whole along every other dim.
     */
    static long[] sendSplits(long[] shape, int destDim, long[] destSizes) {
        long rowElements = CollectiveShapes.rowElements(shape, destDim);
        long[] splits = new long[destSizes.length];
        for (int r = 0; r < destSizes.length; r++) {
            splits[r] = destSizes[r] * rowElements;
        }
        return splits;
    }

    /**
     * Elements rank {@code rank} receives from each rank in an all-to-all of inputs shaped like {@code shape} except on
     * {@code srcDim}: rank r sends its {@code srcSizes[r]} indices of {@code srcDim} and this rank's
     * {@code destSizes[rank]} indices of {@code destDim}.
     */
    static long[] receiveSplits(long[] shape, int srcDim, int destDim, long[] srcSizes, long[] destSizes, int rank) {
        long[] splits = new long[srcSizes.length];
        for (int r = 0; r < srcSizes.length; r++) {
            splits[r] = CollectiveShapes.numel(CollectiveShapes.withDim(CollectiveShapes.withDim(shape, destDim, destSizes[rank]), srcDim,
                srcSizes[r]));
        }
        return splits;
    }
}
