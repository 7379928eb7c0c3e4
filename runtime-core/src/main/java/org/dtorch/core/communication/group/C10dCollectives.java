package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.AllToAllOptions;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.BarrierOptions;
import org.bytedeco.pytorch.LongVector;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.ReduceScatterOptions;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The mapping of {@link CollectiveBackend}'s calls onto c10d's own calls on a {@link C10dGroup}: the barrier, the
 * padded reduce-scatter and all-gathers ({@code _reduce_scatter_base}, {@code _allgather_base}, with uneven shards laid
 * out by {@link UnevenShards}), the all-to-all with split sizes ({@code alltoall_base}), the in-place all-reduces and
 * the batched sends and receives. Inputs that are not contiguous travel through contiguous copies; every result is a
 * new tensor the caller owns, and every temporary is closed before the call returns.
 *
 * <p>Every call runs through the group, so it is refused once the group is closed, waits at most the group's timeout,
 * and fails as {@link C10dErrorTranslator} names it.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class C10dCollectives {
    /** The c10d tag of every send and receive: the ranks' calls are matched in the order they are made. */
    private static final int P2P_TAG = 0;

    private final C10dGroup group;

    C10dCollectives(C10dGroup group) {
        this.group = group;
    }

    /** Blocks until every rank arrived. */
    void barrier() {
        group.run("barrier", () -> {
            try (BarrierOptions o = new BarrierOptions()) {
                o.timeout(group.timeoutMillis());
                return group.pg().barrier(o);
            }
        });
    }

    /**
     * The reduce-scatter along dim 0 through {@code _reduce_scatter_base}: uneven shards are padded to the largest,
     * reduced, and this rank's rows trimmed from its padded slot.
     */
    Tensor reduceScatter(Tensor input, long[] sizes, ReduceOpType op) {
        int rank = group.rank();
        long max = CollectiveShapes.max(sizes);
        Tensor x = input.contiguous();
        Tensor padded = UnevenShards.padEach(x, sizes);
        Tensor out = x.new_empty(CollectiveShapes.withDim(x, 0, max));
        try (ReduceScatterOptions o = new ReduceScatterOptions(); ReduceOp reduce = C10dGroup.reduceOp(op)) {
            o.reduceOp(reduce);
            o.timeout(group.timeoutMillis());
            group.run("reduceScatterTensor(" + op.shortName() + ")", () -> group.pg()._reduce_scatter_base(out, padded, o));
        } catch (RuntimeException e) {
            out.close();
            throw e;
        } finally {
            if (padded != x) {
                padded.close();
            }
            x.close();
        }
        if (sizes[rank] == max) {
            return out;
        }
        try (out) {
            return out.narrow(0, 0, sizes[rank]).clone();
        }
    }

    /** The concatenation along {@code dim} of every rank's input, through one padded {@code _allgather_base}. */
    Tensor allGather(Tensor input, int dim, long[] sizes) {
        List<Tensor> pieces = gatherPieces(input, dim, sizes, "allGather");
        try {
            if (pieces.size() == 1) {
                return pieces.getFirst().contiguous();
            }
            try (TensorVector vector = new TensorVector(pieces.toArray(Tensor[]::new));
                 TensorArrayRef ref = new TensorArrayRef(vector)) {
                return torch.cat(ref, dim);
            }
        } finally {
            pieces.forEach(Tensor::close);
        }
    }

    /** Every rank's input, in rank order, each a contiguous tensor of its own. */
    List<Tensor> allGatherIntoVec(Tensor input, int dim, long[] sizes) {
        List<Tensor> pieces = gatherPieces(input, dim, sizes, "allGatherIntoVec");
        List<Tensor> result = new ArrayList<>(pieces.size());
        for (Tensor piece : pieces) {
            result.add(piece.contiguous());
            piece.close();
        }
        return result;
    }

    /**
     * Gathers every rank's input; returns views, one per rank, shaped like that rank's input. The views
     * share one fresh buffer that nobody else references.
     */
    private List<Tensor> gatherPieces(Tensor input, int dim, long[] sizes, String op) {
        long max = CollectiveShapes.max(sizes);
        Tensor moved = dim == 0 ? input.contiguous() : input.movedim(dim, 0).contiguous();
        Tensor padded = UnevenShards.padTo(moved, max);
        Tensor gathered = moved.new_empty(CollectiveShapes.withDim(moved, 0, max * group.size()));
        try (AllgatherOptions o = new AllgatherOptions()) {
            o.timeout(group.timeoutMillis());
            group.run(op, () -> group.pg()._allgather_base(gathered, padded, o));
        } finally {
            if (padded != moved) {
                padded.close();
            }
            moved.close();
        }
        List<Tensor> pieces = UnevenShards.trim(gathered, sizes);
        if (dim != 0) {
            for (int r = 0; r < pieces.size(); r++) {
                Tensor piece = pieces.get(r);
                pieces.set(r, piece.movedim(0, dim));
                piece.close();
            }
        }
        gathered.close();
        return pieces;
    }

    /** One {@code _allgather_base} of the flattened input into the flattened result of shape {@code stacked}. */
    Tensor allGatherStacked(Tensor input, long[] stacked) {
        Tensor out = input.new_empty(stacked);
        if (input.numel() == 0) {
            return out;
        }
        try (Tensor send = input.contiguous(); Tensor sendFlat = send.view(-1); Tensor outFlat = out.view(-1);
             AllgatherOptions o = new AllgatherOptions()) {
            o.timeout(group.timeoutMillis());
            group.run("allGatherStacked", () -> group.pg()._allgather_base(outFlat, sendFlat, o));
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        return out;
    }

    /**
     * Re-shards from {@code srcDim} to {@code destDim} through one {@code alltoall_base} of flattened per-peer chunks
     * with split sizes ({@link UnevenShards#sendSplits}): packed in rank order, exchanged, and unpacked along
     * {@code srcDim}.
     */
    Tensor allToAll(Tensor input, int srcDim, int destDim, long[] srcSizes, long[] destSizes) {
        int rank = group.rank();
        long[] shape = TorchTensors.shape(input);
        long[] sendSplits = UnevenShards.sendSplits(shape, destDim, destSizes);
        long[] recvSplits = UnevenShards.receiveSplits(shape, srcDim, destDim, srcSizes, destSizes, rank);
        Tensor send = pack(input, destDim, destSizes, sendSplits);
        Tensor recv = input.new_empty(CollectiveShapes.sum(recvSplits));
        try (LongVector outSplits = new LongVector(recvSplits); LongVector inSplits = new LongVector(sendSplits);
             AllToAllOptions o = new AllToAllOptions()) {
            o.timeout(group.timeoutMillis());
            group.run("allToAll", () -> group.pg().alltoall_base(recv, send, outSplits, inSplits, o));
        } catch (RuntimeException e) {
            recv.close();
            throw e;
        } finally {
            send.close();
        }
        long[] outShape = CollectiveShapes.withDim(CollectiveShapes.withDim(input, destDim, destSizes[rank]), srcDim,
            CollectiveShapes.sum(srcSizes));
        Tensor out = input.new_empty(outShape);
        long[] srcOffsets = CollectiveShapes.offsets(srcSizes);
        long position = 0;
        for (int r = 0; r < srcSizes.length; r++) {
            long[] pieceShape = CollectiveShapes.withDim(outShape, srcDim, srcSizes[r]);
            try (Tensor flat = recv.narrow(0, position, recvSplits[r]); Tensor src = flat.view(pieceShape);
                 Tensor dst = out.narrow(srcDim, srcOffsets[r], srcSizes[r])) {
                dst.copy_(src);
            }
            position += recvSplits[r];
        }
        recv.close();
        return out;
    }

    /** A new flat tensor of rank r's {@code destSizes[r]} indices of {@code destDim} of {@code input}, in rank order. */
    private static Tensor pack(Tensor input, int destDim, long[] destSizes, long[] sendSplits) {
        long[] destOffsets = CollectiveShapes.offsets(destSizes);
        Tensor send = input.new_empty(CollectiveShapes.sum(sendSplits));
        long position = 0;
        try {
            for (int r = 0; r < destSizes.length; r++) {
                long[] chunkShape = CollectiveShapes.withDim(input, destDim, destSizes[r]);
                try (Tensor flat = send.narrow(0, position, sendSplits[r]); Tensor dst = flat.view(chunkShape);
                     Tensor src = input.narrow(destDim, destOffsets[r], destSizes[r])) {
                    dst.copy_(src);
                }
                position += sendSplits[r];
            }
        } catch (RuntimeException e) {
            send.close();
            throw e;
        }
        return send;
    }

    /**
     * Sums every tensor over the ranks in place: the tensors go in buckets ({@link ReductionBuckets}), each bucket of
     * several tensors packed into one flat buffer and reduced by one all-reduce, a lone tensor reduced as it is (a
     * contiguous copy of one that is not). Every all-reduce is issued before any is awaited; the results are copied back
     * once all are done.
     */
    void allReduceSumInPlace(Tensor[] tensors) {
        allReduceSumInPlaceAsync(tensors).run();
    }

    /**
     * Issues {@link #allReduceSumInPlace}'s all-reduces and returns what completes them: it waits for every one (each
     * bounded by the group's timeout), copies the sums back into {@code tensors} and releases the buffers and c10d's
     * work, whether it succeeds or not. Until it has run, {@code tensors} must be neither read, written nor closed.
     */
    Runnable allReduceSumInPlaceAsync(Tensor[] tensors) {
        List<List<Integer>> buckets = ReductionBuckets.of(tensors, ReductionBuckets.bucketBytes());
        Tensor[] staged = new Tensor[buckets.size()];
        List<Work> issued = new ArrayList<>(buckets.size());
        long startNanos = System.nanoTime();
        try (AllreduceOptions o = new AllreduceOptions(); ReduceOp sum = C10dGroup.reduceOp(ReduceOpType.SUM)) {
            o.reduceOp(sum);
            o.timeout(group.timeoutMillis());
            for (int b = 0; b < staged.length; b++) {
                staged[b] = packed(tensors, buckets.get(b));
                try (TensorVector one = new TensorVector(staged[b])) {
                    issued.add(group.issue("allReduceSum_", () -> group.pg().allreduce(one, o), startNanos));
                }
            }
        } catch (RuntimeException e) {
            try {
                group.waitAll("allReduceSum_", issued, startNanos); // the issued buffers stay alive until c10d is done with them
            } catch (RuntimeException ignored) {
                // the issue's failure is the one to report
            } finally {
                releaseStaged(tensors, buckets, staged, issued);
            }
            throw e;
        }
        return () -> {
            try {
                group.waitAll("allReduceSum_", issued, startNanos);
                for (int b = 0; b < staged.length; b++) {
                    unpack(staged[b], tensors, buckets.get(b));
                }
            } finally {
                releaseStaged(tensors, buckets, staged, issued);
            }
        };
    }

    /** Closes c10d's work and every buffer that is not one of {@code tensors} itself. */
    private static void releaseStaged(Tensor[] tensors, List<List<Integer>> buckets, Tensor[] staged, List<Work> issued) {
        issued.forEach(Work::close);
        for (int b = 0; b < staged.length; b++) {
            List<Integer> bucket = buckets.get(b);
            if (staged[b] != null && (bucket.size() > 1 || staged[b] != tensors[bucket.getFirst()])) {
                staged[b].close();
            }
        }
    }

    /** The buffer a bucket is reduced in: a lone contiguous tensor itself, else a new flat copy of every tensor in turn. */
    private static Tensor packed(Tensor[] tensors, List<Integer> bucket) {
        if (bucket.size() == 1) {
            Tensor t = tensors[bucket.getFirst()];
            return t.is_contiguous() ? t : t.contiguous();
        }
        List<Tensor> flattened = new ArrayList<>(bucket.size());
        try (TensorVector flat = new TensorVector()) {
            for (int i : bucket) {
                Tensor row = tensors[i].reshape(-1);
                flattened.add(row);
                flat.push_back(row);
            }
            try (TensorArrayRef ref = new TensorArrayRef(flat)) {
                return torch.cat(ref, 0);
            }
        } finally {
            flattened.forEach(Tensor::close); // the vector holds references of its own, released with it
        }
    }

    /** The reduced buffer's values back into the bucket's tensors (nothing to do for a lone contiguous tensor). */
    private static void unpack(Tensor buffer, Tensor[] tensors, List<Integer> bucket) {
        if (bucket.size() == 1) {
            Tensor t = tensors[bucket.getFirst()];
            if (buffer != t) {
                t.copy_(buffer);
            }
            return;
        }
        long offset = 0;
        for (int i : bucket) {
            Tensor t = tensors[i];
            long n = t.numel();
            try (Tensor part = buffer.narrow(0, offset, n); Tensor shaped = part.view(TorchTensors.shape(t))) {
                t.copy_(shaped);
            }
            offset += n;
        }
    }

    /**
     * Issues every send and receive (c10d's {@code batch_isend_irecv}): inside one coalesced group where the backend
     * supports it (NCCL), so that the batch is one launch; else one by one, which Gloo progresses in the background.
     * Tensors that are not contiguous travel through contiguous stand-ins.
     */
    Runnable batchIsendIrecv(List<P2POp> ops) {
        long startNanos = System.nanoTime();
        Tensor[] staged = new Tensor[ops.size()];
        List<Work> issued = new ArrayList<>(ops.size() + 1);
        boolean coalesced = group.pg().supportsCoalescing();
        try {
            if (coalesced) {
                group.pg().startCoalescing();
            }
            for (int i = 0; i < ops.size(); i++) {
                P2POp op = ops.get(i);
                staged[i] = op.tensor().is_contiguous() ? op.tensor() : op.tensor().contiguous();
                try (TensorVector one = new TensorVector(staged[i])) {
                    Work work = group.issue("batchIsendIrecv", () -> op.kind() == P2POp.Kind.ISEND
                        ? group.pg().send(one, op.peer(), P2P_TAG) : group.pg().recv(one, op.peer(), P2P_TAG), startNanos);
                    if (work != null && !work.isNull()) {
                        issued.add(work);
                    }
                }
            }
            if (coalesced) {
                coalesced = false;
                issued.add(group.issue("batchIsendIrecv", group.pg()::endCoalescing, startNanos));
            }
        } catch (RuntimeException e) {
            if (coalesced) {
                group.pg().endCoalescing().close();
            }
            finishBatch(ops, staged, issued, false);
            throw e;
        }
        return () -> {
            try {
                group.waitAll("batchIsendIrecv", issued, startNanos);
            } finally {
                finishBatch(ops, staged, issued, true);
            }
        };
    }

    /** Closes the batch's work and stand-ins, first copying received stand-ins into their tensors when {@code arrived}. */
    private static void finishBatch(List<P2POp> ops, Tensor[] staged, List<Work> issued, boolean arrived) {
        issued.forEach(Work::close);
        for (int i = 0; i < staged.length; i++) {
            Tensor own = ops.get(i).tensor();
            if (staged[i] != null && staged[i] != own) {
                if (arrived && ops.get(i).kind() == P2POp.Kind.IRECV) {
                    own.copy_(staged[i]);
                }
                staged[i].close();
            }
        }
    }
}
