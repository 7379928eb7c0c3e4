package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.List;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Collectives between distinct devices on a c10d process group (docs/communication-core.md, "ThreadGroup"):
 * {@code ProcessGroupGloo} between CPU devices, {@code ProcessGroupNCCL} between CUDA devices. Both are c10d
 * {@code Backend}s with the same calls, so one class drives them. It routes each call to the class that does it:
 * <ul>
 *   <li>{@link C10dRendezvous} makes the group (the ranks meet in a FileStore or at the run-wide rendezvous), and
 *       {@link GlooDevices} gives each CPU device its Gloo transport;</li>
 *   <li>{@link GlooRingRoute} takes host all-reduces, reduce-scatters and all-gathers of 1 MiB and more round
 *       {@link GlooRing}, whose chunks are the ranks' rows as they lie;</li>
 *   <li>{@link HostCopyPipeline} does the other all-reduces: one copy of the input into the result, reduced in place;</li>
 *   <li>{@link C10dCollectives} maps every other call onto c10d's, padding uneven shards to the largest
 *       ({@link UnevenShards}); all-to-all sends flattened per-peer chunks with split sizes, so it needs no padding;</li>
 *   <li>{@link C10dGroup} issues and awaits each c10d call, and {@link C10dErrorTranslator} names its failures.</li>
 * </ul>
 *
 * <p>Streams: Gloo runs on the host, synchronously for the caller. NCCL runs on its own stream, which waits
 * for the caller's current stream when a collective is issued; {@code Work.wait()} then makes the current
 * stream wait for NCCL's, without blocking the host, as in torch.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class C10dBackend implements CollectiveBackend {
    private final C10dGroup group;
    /** Host buffers for all-reduce results and the ring's results; NCCL's results come from libtorch's caching allocator. */
    private final ResultBufferCache results;
    private final HostCopyPipeline hostCopy;
    private final GlooRingRoute ring;
    private final C10dCollectives collectives;

    private C10dBackend(C10dGroup group, ResultBufferCache results, GlooCopyOptions copyOptions, GlooRing.Options ringOptions) {
        this.group = group;
        this.results = results;
        this.hostCopy = new HostCopyPipeline(group, copyOptions);
        this.ring = new GlooRingRoute(group, results, ringOptions);
        this.collectives = new C10dCollectives(group);
    }

    /**
     * Joins a Gloo group: blocks until all {@code size} ranks connected, or the timeout. {@code deviceId} is the
     * rank's CPU device id; it picks the Gloo transport device. The ranks meet at {@code rendezvous}, or in a FileStore
     * when it is null.
     */
    static C10dBackend gloo(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                            long deviceId) {
        return connected(() -> C10dRendezvous.gloo(initPath, rendezvous, groupName, rank, size, timeout, deviceId));
    }

    /**
     * Joins an NCCL group of ranks on distinct CUDA devices; {@code device} is this rank's. NCCL connects
     * lazily, at the first collective (bounded by the timeout like every collective); the ranks meet at
     * {@code rendezvous}, or in a FileStore when it is null.
     */
    static C10dBackend nccl(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                            Device device) {
        return connected(() -> C10dRendezvous.nccl(initPath, rendezvous, groupName, rank, size, timeout, device));
    }

    /**
     * The backend on the group that {@code connect} joins. The system properties the backend reads are read first, so
     * that a bad value fails before anything is sent and leaves no group behind.
     */
    private static C10dBackend connected(Supplier<C10dGroup> connect) {
        GlooCopyOptions copyOptions = GlooCopyOptions.fromSystemProperties();
        GlooRing.Options ringOptions = GlooRing.Options.fromSystemProperties();
        ResultBufferCache results = ResultBufferCache.fromSystemProperties();
        C10dGroup group;
        try {
            group = connect.get();
        } catch (RuntimeException e) {
            results.close();
            throw e;
        }
        return new C10dBackend(group, results, copyOptions, ringOptions);
    }

    @Override
    public String name() {
        return group.backendName();
    }

    @Override
    public void setStream(DeviceStream stream) {
        // Gloo is synchronous on the calling thread; NCCL follows the thread's current stream, which
        // ThreadGroup.setStream makes this one.
    }

    @Override
    public void barrier() {
        collectives.barrier();
    }

    /**
     * The result is a new tensor, in a buffer from {@link #results}. A large contiguous host input is reduced into it
     * round the ring, which reads the input in place; otherwise the input is copied once into the result and reduced
     * there in place ({@link HostCopyPipeline}).
     */
    @Override
    public Tensor allReduce(Tensor input, ReduceOpType op) {
        Tensor result = results.emptyLike(input);
        String name = "allReduce(" + op.shortName() + ")";
        if (ring.takesAllReduce(input)) {
            ring.allReduce(name, input, result, op);
            return result;
        }
        try {
            hostCopy.allReduceInto(name, input, result, op);
        } catch (RuntimeException e) {
            result.close();
            throw e;
        }
        return result;
    }

    @Override
    public Tensor allGather(Tensor input, int dim, long[] sizes) {
        if (ring.takes(input, CollectiveShapes.sum(sizes) * CollectiveShapes.rowElements(input, dim) * input.element_size())) {
            return ring.allGather("allGather", input, dim, sizes);
        }
        return collectives.allGather(input, dim, sizes);
    }

    @Override
    public List<Tensor> allGatherIntoVec(Tensor input, int dim, long[] sizes) {
        return collectives.allGatherIntoVec(input, dim, sizes);
    }

    /** Into one contiguous allocation {@code [size, ...input shape]}: round the ring, or one flat {@code _allgather_base}. */
    @Override
    public Tensor allGatherStacked(Tensor input) {
        long[] shape = TorchTensors.shape(input);
        long[] stacked = new long[shape.length + 1];
        stacked[0] = group.size();
        System.arraycopy(shape, 0, stacked, 1, shape.length);
        if (ring.takes(input, group.size() * input.nbytes())) {
            return ring.allGatherStacked(input, stacked);
        }
        return collectives.allGatherStacked(input, stacked);
    }

    @Override
    public void allReduceSumInPlace(Tensor[] tensors) {
        collectives.allReduceSumInPlace(tensors);
    }

    /** c10d's all-reduces are asynchronous: they run while the caller goes on, until the returned completion waits. */
    @Override
    public Runnable allReduceSumInPlaceAsync(Tensor[] tensors) {
        return collectives.allReduceSumInPlaceAsync(tensors);
    }

    @Override
    public Runnable batchIsendIrecv(List<P2POp> ops) {
        return collectives.batchIsendIrecv(ops);
    }

    @Override
    public Tensor reduceScatter(Tensor input, int dim, long[] sizes, ReduceOpType op) {
        if (dim == 0) {
            return reduceScatterDim0(input, sizes, op);
        }
        try (Tensor moved = input.movedim(dim, 0); Tensor reduced = reduceScatterDim0(moved, sizes, op);
             Tensor back = reduced.movedim(0, dim)) {
            return back.contiguous();
        }
    }

    private Tensor reduceScatterDim0(Tensor input, long[] sizes, ReduceOpType op) {
        if (ring.takes(input, input.nbytes())) {
            return ring.reduceScatter(input, sizes, op);
        }
        return collectives.reduceScatter(input, sizes, op);
    }

    @Override
    public Tensor allToAll(Tensor input, int srcDim, int destDim, long[] srcSizes, long[] destSizes) {
        return collectives.allToAll(input, srcDim, destDim, srcSizes, destSizes);
    }

    /** Closes the group (its process group, store and timeout), then the result buffers. Idempotent. */
    @Override
    public void close() {
        group.close();
        results.close();
    }
}
