package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;

/**
 * How {@link ThreadGroup#allReduceSum_}'s tensors are grouped into flat buffers, as PyTorch's DDP buckets gradients:
 * tensors of one dtype (and device kind: a rank's tensors are on its device), in the order given, fill a bucket until
 * it holds at least {@link #bucketBytes()}; each bucket of two or more tensors is reduced as one flat buffer, so a
 * data-parallel step's many small gradients cost a few all-reduces instead of one each. A tensor larger than a bucket
 * is a bucket of its own. Every rank passes the same tensors in the same order (dtypes and shapes position by
 * position), so every rank makes the same buckets.
 *
 * <p>The size comes from the system property {@value #BUCKET_PROPERTY} (MiB, default {@value #DEFAULT_BUCKET_MIB}, DDP's
 * {@code bucket_cap_mb}); 0 reduces every tensor alone.
 *
 * <p>Thread-safe: stateless.
 */
public final class ReductionBuckets {
    /** The system property that sets a bucket's size in MiB. */
    public static final String BUCKET_PROPERTY = "dtorch.comm.bucketMiB";
    /** A bucket's size in MiB when the property is not set. */
    static final long DEFAULT_BUCKET_MIB = 25;

    private ReductionBuckets() {
    }

    /**
     * The bytes a bucket fills up to: the property's MiB, or 0 (no buckets) when it is 0. The autograd tape fills its
     * buckets of gradients to the same size, so that each of its batched moves is one bucket here.
     */
    public static long bucketBytes() {
        String given = System.getProperty(BUCKET_PROPERTY);
        if (given == null) {
            return DEFAULT_BUCKET_MIB << 20;
        }
        long mib;
        try {
            mib = Long.parseLong(given.trim());
        } catch (NumberFormatException e) {
            mib = -1;
        }
        if (mib < 0 || mib > 1L << 20) {
            throw new IllegalArgumentException(BUCKET_PROPERTY + " must be a whole number of MiB from 0 to 1048576, got '" + given + "'");
        }
        return mib << 20;
    }

    /** The positions of {@code tensors} in each bucket, in the order the buckets fill up. */
    static List<List<Integer>> of(Tensor[] tensors, long bucketBytes) {
        List<List<Integer>> out = new ArrayList<>();
        Map<String, List<Integer>> open = new LinkedHashMap<>();
        Map<String, Long> filled = new LinkedHashMap<>();
        for (int i = 0; i < tensors.length; i++) {
            Tensor t = tensors[i];
            long bytes = t.numel() * t.element_size();
            if (bucketBytes == 0 || bytes >= bucketBytes) {
                out.add(List.of(i));
                continue;
            }
            String key = t.scalar_type().intern() + (t.is_cuda() ? "@cuda" : "@cpu");
            List<Integer> bucket = open.computeIfAbsent(key, k -> new ArrayList<>());
            bucket.add(i);
            long now = filled.merge(key, bytes, Long::sum);
            if (now >= bucketBytes) {
                out.add(List.copyOf(bucket));
                open.remove(key);
                filled.remove(key);
            }
        }
        for (List<Integer> rest : open.values()) {
            out.add(List.copyOf(rest));
        }
        return out;
    }
}
