package org.dtorch.core.communication.group;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * An all-reduce into a new result through c10d's in-place {@code allreduce}: the input is copied once into the result,
 * which is then reduced in place. This is the path of CUDA tensors, of non-contiguous host inputs, and of host
 * all-reduces that do not go round {@link GlooRing}.
 *
 * <p>On a CUDA device the copy is one {@code copy_}. On the host it never uses libtorch's copy kernel, whose intra-op
 * team would compete with every other rank's for the same cores ({@link #copyInto}). A contiguous host input is copied
 * in slices over this rank's share of the processors ({@link HostCopy}), since one thread's memcpy alone costs a large
 * part of the reduction on many cores. When that share leaves a processor beside Gloo's
 * ({@link GlooCopyOptions#firstPieceBytes}), the copy is cut in two: the first piece is copied by the team and its
 * reduction issued; the rest is copied by this thread alone while Gloo's thread reduces the first piece (helpers there
 * would only take memory bandwidth and cores from Gloo, and the copy is hidden anyway), then reduced in a second Gloo
 * round. Only two pieces: every piece costs a Gloo round, more than a finer overlap saves.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class HostCopyPipeline {
    private final C10dGroup group;
    private final GlooCopyOptions options;

    HostCopyPipeline(C10dGroup group, GlooCopyOptions options) {
        this.group = group;
        this.options = options;
    }

    /** Copies {@code input} into {@code result}, of its shape and dtype, and all-reduces {@code result} in place. */
    void allReduceInto(String name, Tensor input, Tensor result, ReduceOpType op) {
        try (AllreduceOptions o = new AllreduceOptions(); ReduceOp reduce = C10dGroup.reduceOp(op)) {
            o.reduceOp(reduce);
            o.timeout(group.timeoutMillis());
            if (result.is_cuda() || !input.is_contiguous()) {
                copyInto(result, input);
                try (TensorVector tensors = new TensorVector(result)) {
                    group.run(name, () -> group.pg().allreduce(tensors, o));
                }
            } else {
                copyAndReduceOnHost(name, input, result, o);
            }
        }
    }

    /** The copy of a contiguous host {@code input} into {@code result}, in one piece or two, and its reduction. */
    private void copyAndReduceOnHost(String name, Tensor input, Tensor result, AllreduceOptions o) {
        long bytes = input.nbytes();
        MemorySegment from = hostBytes(input);
        MemorySegment to = hostBytes(result);
        int share = HostCopy.share(copiersAtOnce());
        int threads = HostCopy.threadsFor(bytes, share, options.copyThreads());
        String copying = name + " on " + group.describe() + ": the copy into the result";
        long firstBytes = options.firstPieceBytes(bytes, share);
        if (firstBytes == 0) {
            HostCopy.copy(from, to, threads, group.timeout(), copying);
            try (TensorVector tensors = new TensorVector(result)) {
                group.run(name, () -> group.pg().allreduce(tensors, o));
            }
            return;
        }
        long firstElements = firstBytes / result.element_size();
        try (Tensor flat = result.view(-1); Tensor head = flat.narrow(0, 0, firstElements);
             Tensor tail = flat.narrow(0, firstElements, flat.numel() - firstElements);
             TensorVector heads = new TensorVector(head); TensorVector tails = new TensorVector(tail)) {
            HostCopy.copy(from.asSlice(0, firstBytes), to.asSlice(0, firstBytes), threads, group.timeout(), copying);
            reduceWhileCopyingTheRest(name, from.asSlice(firstBytes), to.asSlice(firstBytes), heads, tails, o, copying);
        }
    }

    /**
     * Issues the reduction of {@code heads}, copies {@code restFrom} into {@code restTo} on this thread meanwhile, then
     * issues the reduction of {@code tails} and waits for both.
     */
    private void reduceWhileCopyingTheRest(String name, MemorySegment restFrom, MemorySegment restTo, TensorVector heads,
                                           TensorVector tails, AllreduceOptions o, String copying) {
        List<Work> issued = new ArrayList<>(2);
        RuntimeException failure = null;
        long startNanos = System.nanoTime();
        try {
            issued.add(group.issue(name, () -> group.pg().allreduce(heads, o), startNanos));
            HostCopy.copy(restFrom, restTo, 1, group.timeout(), copying);
            issued.add(group.issue(name, () -> group.pg().allreduce(tails, o), startNanos));
        } catch (RuntimeException e) {
            failure = e;
        }
        // Gloo's thread may still be writing the first piece: wait for it whatever happened to the second.
        try {
            group.waitAll(name, issued, startNanos);
        } catch (RuntimeException e) {
            failure = failure == null ? e : withSuppressed(failure, e);
        } finally {
            issued.forEach(Work::close);
        }
        if (failure != null) {
            throw failure;
        }
    }

    private static RuntimeException withSuppressed(RuntimeException first, RuntimeException next) {
        first.addSuppressed(next);
        return first;
    }

    /**
     * The ranks of this JVM that may copy at once: this group's, or every CPU device's with a Gloo group here (the row
     * groups of a 2x2 mesh run at once).
     */
    private int copiersAtOnce() {
        return Math.max(group.size(), GlooDevices.count());
    }

    private static MemorySegment hostBytes(Tensor t) {
        return MemorySegment.ofAddress(TorchTensors.address(t)).reinterpret(t.nbytes());
    }

    /**
     * {@code dst.copy_(src)}; on the host one plain memcpy when {@code src} is contiguous: libtorch's copy kernel
     * splits the work over its intra-op threads, and with every rank copying at once those teams only compete for the
     * same cores (the same choice as the File store's copies, {@link ShmTensors#copyInto}).
     */
    private static void copyInto(Tensor dst, Tensor src) {
        if (dst.is_cuda()) {
            dst.copy_(src);
            return;
        }
        ShmTensors.copyInto(src, hostBytes(dst));
    }
}
