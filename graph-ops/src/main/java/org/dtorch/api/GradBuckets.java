package org.dtorch.api;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.group.ReductionBuckets;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.ops.RedistributeAllSpec;

/**
 * The early moves of one backward pass: a leaf's gradient is final once every recorded node that takes the leaf as an
 * input has been processed (its derivative issued, or skipped because no gradient reached it). Final gradients that must
 * move to their leaf's placements (for data parallelism, partial sums that become {@code Replicate}) are gathered per
 * mesh and dtype, in the order they become final (about the reverse of the forward, as PyTorch's DDP orders its
 * buckets), and a bucket's moves are issued as one batched operator as soon as the bucket holds its cap; the devices run
 * its all-reduces while they go on with the backward's later derivatives. What is left moves at the end of the pass, as
 * before. The first bucket of each mesh and dtype is small ({@link #FIRST_BUCKET_BYTES}, DDP's
 * {@code first_bucket_bytes_cap}) so that communication starts early; the others fill to the communication layer's
 * bucket size ({@code -Ddtorch.comm.bucketMiB}, 0: every gradient moves alone as soon as it is final).
 *
 * <p>The values are the same as with every move at the end: the same gradients are summed, only sooner. A leaf with
 * gradient hooks, and every gradient of a pass that records its operators ({@code create_graph}), moves at the end, where
 * the tape moves it today; {@value #EARLY_PROPERTY}{@code =false} moves every gradient at the end.
 *
 * <p>{@value #REDUCE_PROPERTY}{@code =false} leaves every gradient where the backward made it (a partial sum stays
 * partial), for measuring what the gradients' communication costs; a program that trains needs the default.
 *
 * <p>Not thread-safe: the client thread that runs the pass.
 */
final class GradBuckets {
    /** The system property that switches the early moves off ({@code false}); on by default. */
    static final String EARLY_PROPERTY = "dtorch.autograd.earlyGradReduction";
    /** The system property that leaves the gradients unmoved ({@code false}), for measurements only; on by default. */
    static final String REDUCE_PROPERTY = "dtorch.autograd.gradReduction";
    /** The cap of the first bucket of each mesh and dtype, as DDP's {@code first_bucket_bytes_cap}. */
    static final long FIRST_BUCKET_BYTES = 1L << 20;

    private record Key(DeviceMesh mesh, ScalarType dtype) {
    }

    /** A bucket that fills: its leaves and their (dtype-converted) gradients, and the bytes of one device's share. */
    private static final class Open {
        final List<DTensor> leaves = new ArrayList<>();
        final List<DTensor> grads = new ArrayList<>();
        long bytes;
        boolean first = true;
    }

    private final DTorch runtime;
    private final long bucketBytes;
    /** The recorded inputs (node, position) still to be processed, per leaf. */
    private final Map<DTensor, Integer> contributionsLeft = new IdentityHashMap<>();
    private final Map<Key, Open> open = new LinkedHashMap<>();
    /** The gradients moved early, by leaf: on the leaf's mesh and placements. */
    private final Map<DTensor, DTensor> moved = new IdentityHashMap<>();
    private int bucketsIssued;

    private GradBuckets(DTorch runtime, List<GradTape.Node> nodes, long bucketBytes) {
        this.runtime = runtime;
        this.bucketBytes = bucketBytes;
        for (GradTape.Node node : nodes) {
            for (int i = 0; i < node.inputs.length; i++) {
                DTensor in = node.inputs[i];
                if (node.needs[i] && in != null && in.autograd().gradFn == null) {
                    contributionsLeft.merge(in, 1, Integer::sum);
                }
            }
        }
    }

    /** The early moves of a pass over {@code nodes}, or null when the pass moves its gradients at the end. */
    static GradBuckets of(DTorch runtime, List<GradTape.Node> nodes, boolean batched) {
        if (!batched || !Boolean.parseBoolean(System.getProperty(EARLY_PROPERTY, "true")) || !reducesGradients()) {
            return null;
        }
        return new GradBuckets(runtime, nodes, ReductionBuckets.bucketBytes());
    }

    /** False when {@value #REDUCE_PROPERTY} is {@code false}: gradients stay where the backward made them. */
    static boolean reducesGradients() {
        return Boolean.parseBoolean(System.getProperty(REDUCE_PROPERTY, "true"));
    }

    /** After the roots are seeded: leaves no node contributes to (a root that is a leaf) are final now. */
    void seeded(Map<DTensor, DTensor> leafGrads) {
        for (Map.Entry<DTensor, DTensor> e : leafGrads.entrySet()) {
            if (!contributionsLeft.containsKey(e.getKey())) {
                finalGradient(e.getKey(), e.getValue());
            }
        }
    }

    /** {@code node} was processed: the leaves it was the last contributor to have their final gradient. */
    void processed(GradTape.Node node, DTensor[] inputs, Map<DTensor, DTensor> leafGrads) {
        for (int i = 0; i < inputs.length; i++) {
            DTensor in = inputs[i];
            if (!node.needs[i] || in == null || in.autograd().gradFn != null) {
                continue;
            }
            Integer left = contributionsLeft.merge(in, -1, Integer::sum);
            if (left != null && left == 0) {
                contributionsLeft.remove(in);
                DTensor g = leafGrads.get(in);
                if (g != null) {
                    finalGradient(in, g);
                }
            }
        }
    }

    /** The gradient of {@code leaf} that moved early, on its placements; null when it moves at the end. */
    DTensor moved(DTensor leaf) {
        return moved.get(leaf);
    }

    /** The buckets issued before the end of the pass: for tests and traces. */
    int bucketsIssued() {
        return bucketsIssued;
    }

    private void finalGradient(DTensor leaf, DTensor g) {
        Map<?, ?> hooks = leaf.autograd().hooks;
        if (hooks != null && !hooks.isEmpty() || moved.containsKey(leaf)) {
            return; // a leaf's hooks see its moved gradient at the end of the pass, in the order they always have
        }
        Sharding target = GradTape.gradSharding(leaf);
        if (g.meta().sharding().equals(target) && g.dtype() == leaf.dtype() || !target.mesh().equals(g.mesh())) {
            return; // nothing to move, or a move between meshes: the end of the pass does it, one redistribution each
        }
        DTensor converted = g.dtype() == leaf.dtype() ? g : g.to(leaf.dtype());
        if (converted.meta().sharding().equals(target)) {
            moved.put(leaf, converted);
            return;
        }
        Key key = new Key(converted.mesh(), converted.dtype());
        Open bucket = open.computeIfAbsent(key, k -> new Open());
        bucket.leaves.add(leaf);
        bucket.grads.add(converted);
        bucket.bytes += localBytes(converted);
        long cap = bucket.first ? Math.min(FIRST_BUCKET_BYTES, bucketBytes) : bucketBytes;
        if (bucket.bytes >= cap) {
            issue(bucket);
        }
    }

    private void issue(Open bucket) {
        List<Sharding> targets = new ArrayList<>(bucket.leaves.size());
        for (DTensor leaf : bucket.leaves) {
            targets.add(GradTape.gradSharding(leaf));
        }
        List<DTensor> out = runtime.applyMulti(RedistributeAllSpec.gradientBucket(targets), bucket.grads.toArray(DTensor[]::new));
        for (int i = 0; i < out.size(); i++) {
            moved.put(bucket.leaves.get(i), out.get(i));
        }
        bucket.leaves.clear();
        bucket.grads.clear();
        bucket.bytes = 0;
        bucket.first = false;
        bucketsIssued++;
    }

    /** The bytes of one device's share of {@code g} (a partial sum's whole shape, a shard's rows). */
    private static long localBytes(DTensor g) {
        long[] local = g.meta().layout().localShape(g.mesh().deviceIds().getFirst());
        long numel = 1;
        for (long s : local) {
            numel *= s;
        }
        return numel * DTensor.elementSize(g.dtype());
    }
}
