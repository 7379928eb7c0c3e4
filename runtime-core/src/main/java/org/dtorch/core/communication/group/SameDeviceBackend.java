package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.CudaFusedReduce;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Collectives between ranks that share one device, built on {@link TensorStore} (docs/communication-core.md,
 * "ThreadGroup"): the single-device simulation of N devices, where NCCL or Gloo would be pointless or impossible.
 *
 * <p>Protocol of every collective: each rank {@code srcSet}s its input (and, for all-reduce, its output
 * buffer) for the {@code size - 1} others, {@code destGet}s theirs, computes with libtorch, and
 * {@code destFinishGet}s; it then waits in {@code srcWaitUntilGetFinished} until the others are done
 * with its tensors. Tensors are shared, never copied, across ranks.
 *
 * <p>Two choices differ from DTorch ({@code docs/adr/0004-same-device-backend.md}):
 * <ul>
 *   <li>Keys carry a per-group sequence number ({@code 17/in/2}) and a key is free again once its
 *       producer's wait returns, so no {@code Reset()} (two barriers) is needed after each collective.</li>
 *   <li>All-reduce is computed in parallel and writes each piece into every rank's output while it is hot,
 *       instead of every rank sharing rank 0's result: on the host rank 0 reduces disjoint slices with a team
 *       of threads ({@link HostReduction}); on CUDA rank r reduces its balanced slice. Results are never
 *       aliased across ranks, so a kernel may modify its output in place.</li>
 * </ul>
 *
 * <p>Every rank checks that the others' tensors agree with its own (dtype, shape except the sharded
 * dimension) and, if not, all ranks fail alike after releasing each other.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class SameDeviceBackend implements CollectiveBackend {
    /**
     * Elements are reduced in chunks of this many bytes: small enough to stay in cache, and under
     * libtorch's intra-op grain (32768 elements), so the ranks' threads do not each start a parallel
     * team on an already busy CPU.
     */
    private static final long CHUNK_BYTES = 64 * 1024;

    private final TensorStore store;
    /**
     * Host result buffers, kept between all-reduces when the store is the memory store: a fresh large block faults
     * every page on first write, which costs more than the reduction.
     */
    private final ResultBufferCache results = ResultBufferCache.fromSystemProperties();
    private final String groupName;
    private final int rank;
    private final int size;
    private final SameDeviceP2P p2p;
    private DeviceStream stream;
    private long sequence;

    SameDeviceBackend(TensorStore store, String groupName, DeviceStream stream) {
        this.store = store;
        this.groupName = groupName;
        this.rank = store.rank();
        this.size = store.worldSize();
        this.stream = stream;
        this.p2p = new SameDeviceP2P(store, groupName);
    }

    @Override
    public String name() {
        return "same-device";
    }

    @Override
    public void setStream(DeviceStream stream) {
        this.stream = stream;
    }

    @Override
    public void barrier() {
        store.barrier();
    }

    @Override
    public Tensor allReduce(Tensor input, ReduceOpType op) {
        Tensor x = input.contiguous();
        // Peers write their share of the result into every rank's output: it must be memory they all see. On the
        // host, shared memory of the store's. On CUDA, device memory: threads of one process share it, and a File
        // store lends it to other processes through CUDA IPC, where peers write into the mapped allocation. Those
        // writes are done before this rank's srcWaitUntilGetFinished(out) returns: a consumer's destFinishGet waits on
        // its host until its stream ran what it issued, the writes included (docs/gpu.md, process mode on CUDA).
        Tensor out = x.is_cuda() ? x.new_empty(TorchTensors.shape(x))
            : store.type() == TensorStoreType.MEMORY ? results.emptyLike(x) : store.allocate(TorchTensors.shape(x), TorchTensors.dtype(x));
        if (size == 1) {
            out.copy_(x);
            x.close();
            finishAverage(out, op);
            return out;
        }
        long seq = ++sequence;
        Exchange inputs = new Exchange(seq, "in", x);
        Exchange outputs = new Exchange(seq, "out", out);
        try {
            // Both published before either is taken: one wait for the peers, not two.
            inputs.publish();
            outputs.publish();
            inputs.take();
            outputs.take();
            inputs.checkAgree("allReduce", -1);
            long numel = x.numel();
            CudaFusedReduce.Combine combine = fusedCombine(op);
            if (x.is_cuda() && CudaFusedReduce.supports(x.scalar_type(), combine, op == ReduceOpType.AVG) && size <= CudaFusedReduce.MAX_TENSORS) {
                // One pass over this rank's slice: every input read once, every output written once, about half the
                // bytes libtorch's binary operators would move.
                // Slices are whole 16-byte units, so that the kernel moves vectors; the last rank takes the tail.
                // Fewer units than ranks leave the last ranks no unit (the balanced split), only the last one its tail.
                long perUnit = Math.max(1, 16 / x.element_size());
                long units = numel / perUnit;
                long start = BalancedSplit.offset(units, size, rank) * perUnit;
                long count = rank == size - 1 ? numel - start : BalancedSplit.size(units, size, rank) * perUnit;
                CudaFusedReduce.allReduceRange(inputs.tensors, outputs.tensors, start, count, combine, op == ReduceOpType.AVG,
                    DeviceStream.of(TorchTensors.device(x)));
            } else if (!x.is_cuda()) {
                // On the host, rank 0 reduces every slice with a team of threads; the others wait in release() until
                // it finished with their tensors, their outputs written.
                if (rank == 0) {
                    HostReduction.allReduce(inputs.tensors, outputs.tensors, op, store.timeout());
                }
            } else {
                // Rank r reduces its balanced slice; fewer elements than ranks leave the last ranks nothing to do.
                reduceIntoAll(inputs.tensors, outputs.tensors, BalancedSplit.offset(numel, size, rank), BalancedSplit.size(numel, size, rank), op);
            }
        } catch (RuntimeException e) {
            inputs.abandon(e);
            outputs.abandon(e);
            out.close();
            x.close();
            throw e;
        }
        inputs.release();
        outputs.release();
        x.close();
        return out;
    }

    private static CudaFusedReduce.Combine fusedCombine(ReduceOpType op) {
        return switch (op) {
            case SUM, AVG -> CudaFusedReduce.Combine.SUM;
            case PRODUCT -> CudaFusedReduce.Combine.PRODUCT;
            case MAX -> CudaFusedReduce.Combine.MAX;
            case MIN -> CudaFusedReduce.Combine.MIN;
        };
    }

    /** Reduces elements [start, start + count) of every input and writes them into every output. */
    private void reduceIntoAll(Tensor[] ins, Tensor[] outs, long start, long count, ReduceOpType op) {
        Tensor[] flatIns = new Tensor[size];
        Tensor[] flatOuts = new Tensor[size];
        try {
            for (int r = 0; r < size; r++) {
                flatIns[r] = ins[r].view(-1);
                flatOuts[r] = outs[r].view(-1);
            }
            // On CUDA one launch per rank and step covers the whole slice: the GPU is wide, launches are the cost.
            long chunk = ins[0].is_cuda() ? Math.max(1, count) : Math.max(1, CHUNK_BYTES / ins[0].element_size());
            for (long pos = start; pos < start + count; pos += chunk) {
                long n = Math.min(chunk, start + count - pos);
                try (Tensor acc = flatOuts[rank].narrow(0, pos, n)) {
                    combineInto(acc, flatIns, pos, n, op);
                    for (int r = 0; r < size; r++) {
                        if (r != rank) {
                            try (Tensor dst = flatOuts[r].narrow(0, pos, n)) {
                                dst.copy_(acc);
                            }
                        }
                    }
                }
            }
        } finally {
            closeAll(flatIns);
            closeAll(flatOuts);
        }
    }

    /** {@code acc = op(sources[0][pos:pos+n], ..., sources[size-1][pos:pos+n])}, dim 0. */
    private void combineInto(Tensor acc, Tensor[] sources, long pos, long n, ReduceOpType op) {
        // The first two sources combine straight into acc (one pass fewer over memory than copy-then-combine).
        try (Tensor first = sources[0].narrow(0, pos, n); Tensor second = sources[1].narrow(0, pos, n)) {
            combineOut(acc, first, second, op);
        }
        for (int r = 2; r < size; r++) {
            try (Tensor next = sources[r].narrow(0, pos, n)) {
                combine(acc, next, op);
            }
        }
        finishAverage(acc, op);
    }

    /** {@code out = op(a, b)}. */
    static void combineOut(Tensor out, Tensor a, Tensor b, ReduceOpType op) {
        Tensor result = switch (op) {
            case SUM, AVG -> torch.add_out(out, a, b);
            case PRODUCT -> torch.mul_out(out, a, b);
            case MAX -> torch.maximum_out(out, a, b);
            case MIN -> torch.minimum_out(out, a, b);
        };
        result.close(); // a second handle on out
    }

    static void combine(Tensor acc, Tensor next, ReduceOpType op) {
        switch (op) {
            case SUM, AVG -> acc.add_(next);
            case PRODUCT -> acc.mul_(next);
            case MAX -> torch.maximum_out(acc, acc, next).close();
            case MIN -> torch.minimum_out(acc, acc, next).close();
        }
    }

    private void finishAverage(Tensor acc, ReduceOpType op) {
        if (op == ReduceOpType.AVG && size > 1) {
            try (org.bytedeco.pytorch.Scalar divisor = new org.bytedeco.pytorch.Scalar((double) size)) {
                acc.div_(divisor);
            }
        }
    }

    @Override
    public Tensor allGather(Tensor input, int dim, long[] sizes) {
        Exchange inputs = new Exchange(++sequence, "in", input);
        return inputs.around(() -> {
            inputs.checkAgree("allGather", dim);
            return cat(Arrays.asList(inputs.tensors), dim);
        });
    }

    @Override
    public List<Tensor> allGatherIntoVec(Tensor input, int dim, long[] sizes) {
        Exchange inputs = new Exchange(++sequence, "in", input);
        return inputs.around(() -> {
            inputs.checkAgree("allGatherIntoVec", dim);
            List<Tensor> copies = new ArrayList<>(size);
            for (Tensor t : inputs.tensors) {
                copies.add(t.clone());
            }
            return copies;
        });
    }

    @Override
    public Tensor allGatherStacked(Tensor input) {
        Exchange inputs = new Exchange(++sequence, "in", input);
        return inputs.around(() -> {
            inputs.checkAgree("allGatherStacked", -1);
            try (TensorVector vector = new TensorVector(inputs.tensors); TensorArrayRef ref = new TensorArrayRef(vector)) {
                return torch.stack(ref, 0);
            }
        });
    }

    /** In memory there is nothing to submit ahead: one all-reduce after the other, each copied back into its tensor. */
    @Override
    public void allReduceSumInPlace(Tensor[] tensors) {
        for (Tensor t : tensors) {
            try (Tensor sum = allReduce(t, ReduceOpType.SUM)) {
                t.copy_(sum);
            }
        }
    }

    @Override
    public Runnable batchIsendIrecv(List<P2POp> ops) {
        return p2p.batch(ops, stream);
    }

    @Override
    public Tensor reduceScatter(Tensor input, int dim, long[] sizes, ReduceOpType op) {
        long offset = CollectiveShapes.offsets(sizes)[rank];
        Exchange inputs = new Exchange(++sequence, "in", input);
        return inputs.around(() -> {
            inputs.checkAgree("reduceScatterTensor", -1);
            Tensor out = input.new_empty(CollectiveShapes.withDim(input, dim, sizes[rank]));
            try (Tensor first = inputs.tensors[0].narrow(dim, offset, sizes[rank])) {
                out.copy_(first);
            }
            for (int r = 1; r < size; r++) {
                try (Tensor next = inputs.tensors[r].narrow(dim, offset, sizes[rank])) {
                    combine(out, next, op);
                }
            }
            finishAverage(out, op);
            return out;
        });
    }

    @Override
    public Tensor allToAll(Tensor input, int srcDim, int destDim, long[] srcSizes, long[] destSizes) {
        long destOffset = CollectiveShapes.offsets(destSizes)[rank];
        Exchange inputs = new Exchange(++sequence, "in", input);
        return inputs.around(() -> {
            inputs.checkAgree("allToAll", srcDim);
            List<Tensor> mine = new ArrayList<>(size);
            try {
                for (Tensor t : inputs.tensors) {
                    mine.add(t.narrow(destDim, destOffset, destSizes[rank]));
                }
                return cat(mine, srcDim);
            } finally {
                mine.forEach(Tensor::close);
            }
        });
    }

    @Override
    public void close() {
        store.close();
        results.close();
    }

    private static Tensor cat(List<Tensor> pieces, int dim) {
        try (TensorVector vector = new TensorVector(pieces.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(vector)) {
            return torch.cat(ref, dim);
        }
    }

    private static void closeAll(Tensor[] tensors) {
        for (Tensor t : tensors) {
            if (t != null) {
                t.close();
            }
        }
    }

    /**
     * One tensor per rank exchanged through the store under the keys {@code <sequence>/<name>/<rank>}:
     * this rank's own and, after {@link #publishAndTake()}, new references to everyone else's.
     *
     * <p>Not thread-safe: used by one rank's thread within one collective.
     */
    private final class Exchange {
        final Tensor[] tensors = new Tensor[size];
        private final String prefix;
        private final Tensor own;
        private boolean published;

        Exchange(long sequence, String name, Tensor own) {
            this.prefix = sequence + "/" + name + "/";
            this.own = own;
            tensors[rank] = own;
        }

        /** Publishes, takes, runs {@code body}, and releases; on failure, {@link #abandon}s. */
        <T> T around(java.util.function.Supplier<T> body) {
            T result;
            try {
                publishAndTake();
                result = body.get();
            } catch (RuntimeException e) {
                abandon(e);
                throw e;
            }
            release();
            return result;
        }

        void publishAndTake() {
            publish();
            take();
        }

        /** Publishes this rank's tensor for the others. */
        void publish() {
            if (size > 1) {
                store.srcSet(prefix + rank, own, stream, size - 1);
                published = true;
            }
        }

        /** Takes every other rank's tensor, waiting for each to be published. */
        void take() {
            for (int r = 0; r < size; r++) {
                if (r != rank) {
                    tensors[r] = store.destGet(prefix + r, stream);
                }
            }
        }

        /** Fails, on every rank alike, if the ranks' tensors differ in dtype or in any dim but {@code freeDim}. */
        void checkAgree(String op, int freeDim) {
            long[] expected = TorchTensors.shape(own);
            for (int r = 0; r < size; r++) {
                Tensor t = tensors[r];
                long[] shape = TorchTensors.shape(t);
                boolean sameShape = shape.length == expected.length;
                for (int d = 0; sameShape && d < shape.length; d++) {
                    sameShape = d == freeDim || shape[d] == expected[d];
                }
                if (TorchTensors.dtype(t) != TorchTensors.dtype(own) || !sameShape) {
                    throw new IllegalArgumentException(op + " on group " + groupName + " (rank " + rank + " of " + size
                        + ", same-device): ranks disagree: rank " + rank + " has " + TorchTensors.describe(own) + ", rank " + r
                        + " has " + TorchTensors.describe(t));
                }
            }
        }

        /** Finishes every take, then waits until the others finished with this rank's tensor. */
        void release() {
            finishTakes();
            if (published) {
                published = false;
                store.srcWaitUntilGetFinished(prefix + rank, stream);
            }
        }

        /**
         * Cleans up after {@code failure}: finishes the takes; waits for the peers only when they are known
         * to be healthy (they disagreed on input, and fail alike). Errors are added to {@code failure}.
         */
        void abandon(RuntimeException failure) {
            try {
                finishTakes();
                if (published && failure instanceof IllegalArgumentException) {
                    published = false;
                    store.srcWaitUntilGetFinished(prefix + rank, stream);
                }
            } catch (RuntimeException cleanup) {
                failure.addSuppressed(cleanup);
            }
        }

        private void finishTakes() {
            for (int r = 0; r < size; r++) {
                if (r != rank && tensors[r] != null) {
                    // Closed first: once the producer's wait returns, no handle of ours keeps its result buffer from reuse.
                    tensors[r].close();
                    tensors[r] = null;
                    store.destFinishGet(prefix + r, stream);
                }
            }
        }
    }
}
