package org.dtorch.core.communication.group;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.AllToAllOptions;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.BarrierOptions;
import org.bytedeco.pytorch.FileStore;
import org.bytedeco.pytorch.LongVector;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.ReduceScatterOptions;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousGroupStore;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Collectives between distinct devices on a c10d process group (docs/communication-core.md, "ThreadGroup"):
 * {@code ProcessGroupGloo} between CPU devices, {@code ProcessGroupNCCL} between CUDA devices. Both are c10d
 * {@code Backend}s with the same calls, so one class drives them. The ranks meet over a c10d {@code FileStore} under
 * the instance's directory, or, when the group is given a run-wide {@link RendezvousAddress} (ranks on several hosts),
 * over a {@code PrefixStore} of the group's name on a pooled {@code TCPStore} client of it ({@link RendezvousGroupStore}).
 *
 * <p>Gloo and NCCL move equal-sized buffers; uneven shards are padded to the largest shard (at most one row
 * more, with the balanced split), moved, and trimmed. All-to-all sends flattened per-peer chunks with
 * split sizes, so unequal shapes on both dims need no padding. On the host, all-reduces, reduce-scatters and
 * all-gathers of 1 MiB and more go round {@link GlooRing} instead, whose chunks are the ranks' rows as they lie.
 *
 * <p>Streams: Gloo runs on the host, synchronously for the caller. NCCL runs on its own stream, which waits
 * for the caller's current stream when a collective is issued; {@code Work.wait()} then makes the current
 * stream wait for NCCL's, without blocking the host, as in torch.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class C10dBackend implements CollectiveBackend {
    /** System property: host name or address Gloo binds to; default the loopback address. */
    static final String HOSTNAME_PROPERTY = ThreadGroupManager.GLOO_HOSTNAME_PROPERTY;
    private static final String DEFAULT_HOSTNAME = "127.0.0.1";
    /** The c10d tag of every send and receive: the ranks' calls are matched in the order they are made. */
    private static final int P2P_TAG = 0;

    private final String backendName;
    private final String groupName;
    private final int rank;
    private final int size;
    /** Where the ranks met, or null for a FileStore; named in errors. */
    private final RendezvousAddress rendezvous;
    private final Duration timeout;
    /** The timeout as c10d wants it; copied into every options object, closed with the backend. */
    private final Milliseconds timeoutMillis;
    /** The FileStore or the {@link RendezvousGroupStore} the ranks met through; closed after the group. */
    private final AutoCloseable store;
    private final Backend pg;
    /** Host buffers for all-reduce results; NCCL's results come from libtorch's caching allocator. */
    private final ResultBufferCache results = ResultBufferCache.fromSystemProperties();
    /** How a host all-reduce's input gets into its result buffer when the ring does not apply. */
    private final GlooCopyOptions copyOptions = GlooCopyOptions.fromSystemProperties();
    /** Whether large host all-reduces, reduce-scatters and all-gathers go round {@link GlooRing} (decisions 485, 486), in what segments. */
    private final GlooRing.Options ringOptions = GlooRing.Options.fromSystemProperties();
    private boolean closed;

    private C10dBackend(String backendName, String groupName, int rank, int size, RendezvousAddress rendezvous, Duration timeout,
                        Milliseconds timeoutMillis, AutoCloseable store, Backend pg) {
        this.backendName = backendName;
        this.groupName = groupName;
        this.rank = rank;
        this.size = size;
        this.rendezvous = rendezvous;
        this.timeout = timeout;
        this.timeoutMillis = timeoutMillis;
        this.store = store;
        this.pg = pg;
    }

    /**
     * Joins a Gloo group: blocks until all {@code size} ranks connected, or the timeout. {@code deviceId} is the
     * rank's CPU device id; it picks the Gloo transport device (one TCP event loop per CPU device id). The ranks meet at
     * {@code rendezvous}, or in a FileStore when it is null.
     */
    static C10dBackend gloo(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                            long deviceId) {
        return connect("gloo", initPath, rendezvous, groupName, rank, size, timeout, (store, timeoutMillis) -> {
            try (ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(timeoutMillis)) {
                options.devices().push_back(GlooDevice.forCpuDevice(deviceId));
                options.threads(1);
                GlooLog.Muting quiet = GlooLog.muteWhileConnecting();
                try {
                    return new ProcessGroupGloo(store, rank, size, options);
                } finally {
                    quiet.close();
                }
            }
        });
    }

    /**
     * Joins an NCCL group of ranks on distinct CUDA devices; {@code device} is this rank's. NCCL connects
     * lazily, at the first collective (bounded by the timeout like every collective); the ranks meet at
     * {@code rendezvous}, or in a FileStore when it is null.
     */
    static C10dBackend nccl(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                            Device device) {
        Cuda.require(device);
        return connect("nccl", initPath, rendezvous, groupName, rank, size, timeout,
            (store, timeoutMillis) -> NcclGroups.create(store, rank, size, timeoutMillis));
    }

    private interface Connector {
        Backend connect(Store store, Milliseconds timeoutMillis);
    }

    private static C10dBackend connect(String backendName, String initPath, RendezvousAddress rendezvous, String groupName, int rank,
                                       int size, Duration timeout, Connector connector) {
        long startNanos = System.nanoTime();
        String described = describe(groupName, rank, size, backendName, rendezvous);
        Milliseconds timeoutMillis = new Milliseconds(timeout.toMillis());
        AutoCloseable store = null;
        try {
            Backend pg;
            if (rendezvous == null) {
                FileStore fileStore = new FileStore(CommPaths.file(initPath, ".filestore").toString(), size);
                store = fileStore;
                fileStore.setTimeout(timeoutMillis);
                pg = connector.connect(fileStore, timeoutMillis);
            } else {
                RendezvousGroupStore shared = RendezvousGroupStore.connect(rendezvous, initPath, timeout, "connect to " + described);
                store = shared;
                pg = shared.handOver(prefixed -> connector.connect(prefixed, timeoutMillis));
                if (backendName.equals("gloo") && !glooConnectsLazily()) {
                    // Gloo uses its store only while connecting, NCCL at every new communicator: a Gloo group's client
                    // serves the next group, so a process opens few connections (each new one risks a DNS stall).
                    shared.close();
                }
            }
            return new C10dBackend(backendName, groupName, rank, size, rendezvous, timeout, timeoutMillis, store, pg);
        } catch (RuntimeException e) {
            closeQuietly(store);
            timeoutMillis.close();
            if (e instanceof CommException named) {
                throw named; // the rendezvous could not be reached; the message names it and the group
            }
            throw translate(backendName, "connect", described, timeout, e, startNanos);
        }
    }

    /** True when c10d's {@code TORCH_GLOO_LAZY_INIT} is set: Gloo then connects each pair through its store at first use. */
    private static boolean glooConnectsLazily() {
        String lazy = System.getenv("TORCH_GLOO_LAZY_INIT");
        return lazy != null && !lazy.isBlank() && !lazy.strip().equals("0");
    }

    private static void closeQuietly(AutoCloseable store) {
        if (store == null) {
            return;
        }
        try {
            store.close();
        } catch (Exception e) {
            // the connection failure is what the caller needs to see
        }
    }

    @Override
    public String name() {
        return backendName;
    }

    @Override
    public void setStream(DeviceStream stream) {
        // Gloo is synchronous on the calling thread; NCCL follows the thread's current stream, which
        // ThreadGroup.setStream makes this one.
    }

    @Override
    public void barrier() {
        run("barrier", () -> {
            try (BarrierOptions o = new BarrierOptions()) {
                o.timeout(timeoutMillis);
                return pg.barrier(o);
            }
        });
    }

    /**
     * The result is a new tensor, in a buffer from {@link #results}. A large contiguous host input is reduced into it by
     * a ring of sends and receives that reads the input in place ({@link GlooRing}, decision 485). Otherwise the input is
     * copied once into the result and reduced there in place (decision 190): on the host the copy is cut into slices
     * over spare processors and may overlap the reduction of a first piece ({@link #copyAndReduceOnHost}); elsewhere it
     * is one {@code copy_}.
     */
    @Override
    public Tensor allReduce(Tensor input, ReduceOpType op) {
        Tensor result = results.emptyLike(input);
        String name = "allReduce(" + op.shortName() + ")";
        if (!backendName.equals("nccl") && ringOptions.applies(input, size)) {
            onRing(name, result, (ring, deadlineNanos, failures) -> ring.allReduce(input, result, op, deadlineNanos, failures));
            return result;
        }
        try (AllreduceOptions o = new AllreduceOptions(); ReduceOp reduce = reduceOp(op)) {
            o.reduceOp(reduce);
            o.timeout(timeoutMillis);
            if (result.is_cuda() || !input.is_contiguous()) {
                copyInto(result, input);
                try (TensorVector tensors = new TensorVector(result)) {
                    run(name, () -> pg.allreduce(tensors, o));
                }
            } else {
                copyAndReduceOnHost(name, input, result, o);
            }
        } catch (RuntimeException e) {
            result.close();
            throw e;
        }
        return result;
    }

    /** True when a host collective of tensors like {@code like}, {@code bytes} in all, goes round {@link GlooRing} (decision 486). */
    private boolean ringFor(Tensor like, long bytes) {
        return !backendName.equals("nccl") && ringOptions.applies(like, bytes, size);
    }

    /** Elements of one index of {@code dim} of {@code t}: the product of the other dims' sizes. */
    private static long rowElements(Tensor t, int dim) {
        long elements = 1;
        for (int d = 0; d < t.dim(); d++) {
            if (d != dim) {
                elements *= t.size(d);
            }
        }
        return elements;
    }

    /** {@code dims}' sizes with dim 0 replaced by {@code rows}. */
    private static long[] withRows(long[] shape, long rows) {
        long[] out = shape.clone();
        out[0] = rows;
        return out;
    }

    /**
     * The all-gather along {@code dim} round {@link GlooRing}: rank r's rows land at their place in one result buffer
     * from {@link #results}, no padding, no per-rank pieces, no concatenation. Along another dim the rows are gathered
     * with {@code dim} moved first, and moved back into a contiguous result.
     */
    private Tensor ringGather(String name, Tensor input, int dim, long[] sizes) {
        try (Tensor moved = dim == 0 ? input.contiguous() : input.movedim(dim, 0).contiguous()) {
            long rowElements = rowElements(moved, 0);
            Tensor gathered = results.empty(withRows(TorchTensors.shape(moved), CollectiveShapes.sum(sizes)), TorchTensors.dtype(moved));
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

    /**
     * The reduce-scatter along dim 0 of a host tensor round {@link GlooRing}: the chunks are the ranks' rows as they
     * lie, so uneven sizes need no padding; the partial sums travel through a buffer from {@link #results}.
     */
    private Tensor ringReduceScatter(Tensor input, long[] sizes, ReduceOpType op) {
        try (Tensor x = input.contiguous(); Tensor work = size > 2 ? results.empty(TorchTensors.shape(x), TorchTensors.dtype(x)) : null) {
            long rowElements = rowElements(x, 0);
            Tensor result = results.empty(withRows(TorchTensors.shape(x), sizes[rank]), TorchTensors.dtype(x));
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
            if (closed) {
                throw new IllegalStateException(name + " on " + describe() + ": the group is closed");
            }
            long startNanos = System.nanoTime();
            try {
                call.run(new GlooRing(pg, rank, size, ringOptions), startNanos + timeout.toNanos(),
                    (what, cause) -> translate(backendName, name, what, describe(), timeout, cause, startNanos));
            } catch (CommException e) {
                throw e;
            } catch (RuntimeException e) {
                throw translate(name, e, startNanos);
            }
        } catch (RuntimeException e) {
            result.close();
            throw e;
        }
    }

    /**
     * Copies the contiguous host {@code input} into {@code result} and all-reduces {@code result} in place. The copy
     * takes this rank's share of the processors ({@link HostCopy}, decision 200). When the share leaves a processor
     * beside Gloo's ({@link GlooCopyOptions#firstPieceBytes}), it is cut in two (decision 201): the first piece is
     * copied by the team and its reduction issued; the rest is copied by this thread alone while Gloo's thread reduces
     * the first piece (helpers there would only take memory bandwidth and cores from Gloo, and the copy is hidden
     * anyway), then reduced in a second Gloo round. Only two pieces: every piece costs a Gloo round, which is why the
     * four-piece pipeline was dropped (decision 190).
     */
    private void copyAndReduceOnHost(String name, Tensor input, Tensor result, AllreduceOptions o) {
        long bytes = input.nbytes();
        MemorySegment from = hostBytes(input);
        MemorySegment to = hostBytes(result);
        int share = HostCopy.share(copiersAtOnce());
        int threads = HostCopy.threadsFor(bytes, share, copyOptions.copyThreads());
        String copying = name + " on " + describe() + ": the copy into the result";
        long firstBytes = copyOptions.firstPieceBytes(bytes, share);
        if (firstBytes == 0) {
            HostCopy.copy(from, to, threads, timeout, copying);
            try (TensorVector tensors = new TensorVector(result)) {
                run(name, () -> pg.allreduce(tensors, o));
            }
            return;
        }
        long firstElements = firstBytes / result.element_size();
        try (Tensor flat = result.view(-1); Tensor head = flat.narrow(0, 0, firstElements);
             Tensor tail = flat.narrow(0, firstElements, flat.numel() - firstElements);
             TensorVector heads = new TensorVector(head); TensorVector tails = new TensorVector(tail)) {
            HostCopy.copy(from.asSlice(0, firstBytes), to.asSlice(0, firstBytes), threads, timeout, copying);
            List<Work> issued = new ArrayList<>(2);
            RuntimeException failure = null;
            long startNanos = System.nanoTime();
            try {
                issued.add(issue(name, () -> pg.allreduce(heads, o), startNanos));
                HostCopy.copy(from.asSlice(firstBytes), to.asSlice(firstBytes), 1, timeout, copying);
                issued.add(issue(name, () -> pg.allreduce(tails, o), startNanos));
            } catch (RuntimeException e) {
                failure = e;
            }
            // Gloo's thread may still be writing the first piece: wait for it whatever happened to the second.
            try {
                waitAll(name, issued, startNanos);
            } catch (RuntimeException e) {
                failure = failure == null ? e : withSuppressed(failure, e);
            } finally {
                issued.forEach(Work::close);
            }
            if (failure != null) {
                throw failure;
            }
        }
    }

    private static RuntimeException withSuppressed(RuntimeException first, RuntimeException next) {
        first.addSuppressed(next);
        return first;
    }

    /** The ranks of this JVM that may copy at once: this group's, or every CPU device's with a Gloo group here. */
    private int copiersAtOnce() {
        return Math.max(size, GlooDevice.count());
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

    @Override
    public Tensor allGather(Tensor input, int dim, long[] sizes) {
        if (ringFor(input, CollectiveShapes.sum(sizes) * rowElements(input, dim) * input.element_size())) {
            return ringGather("allGather", input, dim, sizes);
        }
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

    @Override
    public List<Tensor> allGatherIntoVec(Tensor input, int dim, long[] sizes) {
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
        Tensor padded = moved;
        if (moved.size(0) != max) {
            padded = moved.new_zeros(CollectiveShapes.withDim(moved, 0, max));
            try (Tensor head = padded.narrow(0, 0, moved.size(0))) {
                head.copy_(moved);
            }
        }
        Tensor gathered = moved.new_empty(CollectiveShapes.withDim(moved, 0, max * size));
        try (AllgatherOptions o = new AllgatherOptions()) {
            o.timeout(timeoutMillis);
            Tensor send = padded;
            run(op, () -> pg._allgather_base(gathered, send, o));
        } finally {
            if (padded != moved) {
                padded.close();
            }
            moved.close();
        }
        List<Tensor> pieces = new ArrayList<>(size);
        for (int r = 0; r < size; r++) {
            Tensor piece = gathered.narrow(0, r * max, sizes[r]);
            if (dim != 0) {
                Tensor back = piece.movedim(0, dim);
                piece.close();
                piece = back;
            }
            pieces.add(piece);
        }
        gathered.close();
        return pieces;
    }

    /** One {@code _allgather_base} of the flattened input into the flattened result: no padding, no per-rank tensor. */
    @Override
    public Tensor allGatherStacked(Tensor input) {
        long[] shape = TorchTensors.shape(input);
        long[] stacked = new long[shape.length + 1];
        stacked[0] = size;
        System.arraycopy(shape, 0, stacked, 1, shape.length);
        if (ringFor(input, size * input.nbytes())) {
            long[] rows = new long[size];
            Arrays.fill(rows, 1);
            try (Tensor one = input.unsqueeze(0); Tensor gathered = ringGather("allGatherStacked", one, 0, rows)) {
                return gathered.view(stacked);
            }
        }
        Tensor out = input.new_empty(stacked);
        if (input.numel() == 0) {
            return out;
        }
        try (Tensor send = input.contiguous(); Tensor sendFlat = send.view(-1); Tensor outFlat = out.view(-1);
             AllgatherOptions o = new AllgatherOptions()) {
            o.timeout(timeoutMillis);
            run("allGatherStacked", () -> pg._allgather_base(outFlat, sendFlat, o));
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        return out;
    }

    /** Non-contiguous tensors are reduced in a contiguous copy, copied back once every reduction is done. */
    @Override
    public void allReduceSumInPlace(Tensor[] tensors) {
        Tensor[] staged = new Tensor[tensors.length];
        List<Work> issued = new ArrayList<>(tensors.length);
        long startNanos = System.nanoTime();
        try (AllreduceOptions o = new AllreduceOptions(); ReduceOp sum = reduceOp(ReduceOpType.SUM)) {
            o.reduceOp(sum);
            o.timeout(timeoutMillis);
            for (int i = 0; i < tensors.length; i++) {
                staged[i] = tensors[i].is_contiguous() ? tensors[i] : tensors[i].contiguous();
                try (TensorVector one = new TensorVector(staged[i])) {
                    issued.add(issue("allReduceSum_", () -> pg.allreduce(one, o), startNanos));
                }
            }
            waitAll("allReduceSum_", issued, startNanos);
            for (int i = 0; i < tensors.length; i++) {
                if (staged[i] != tensors[i]) {
                    tensors[i].copy_(staged[i]);
                }
            }
        } finally {
            issued.forEach(Work::close);
            for (int i = 0; i < tensors.length; i++) {
                if (staged[i] != null && staged[i] != tensors[i]) {
                    staged[i].close();
                }
            }
        }
    }

    /**
     * Issues every send and receive (c10d's {@code batch_isend_irecv}): inside one coalesced group where the backend
     * supports it (NCCL), so that the batch is one launch; else one by one, which Gloo progresses in the background.
     * Tensors that are not contiguous travel through contiguous stand-ins.
     */
    @Override
    public Runnable batchIsendIrecv(List<P2POp> ops) {
        long startNanos = System.nanoTime();
        Tensor[] staged = new Tensor[ops.size()];
        List<Work> issued = new ArrayList<>(ops.size() + 1);
        boolean coalesced = pg.supportsCoalescing();
        try {
            if (coalesced) {
                pg.startCoalescing();
            }
            for (int i = 0; i < ops.size(); i++) {
                P2POp op = ops.get(i);
                staged[i] = op.tensor().is_contiguous() ? op.tensor() : op.tensor().contiguous();
                try (TensorVector one = new TensorVector(staged[i])) {
                    Work work = issue("batchIsendIrecv", () -> op.kind() == P2POp.Kind.ISEND
                        ? pg.send(one, op.peer(), P2P_TAG) : pg.recv(one, op.peer(), P2P_TAG), startNanos);
                    if (work != null && !work.isNull()) {
                        issued.add(work);
                    }
                }
            }
            if (coalesced) {
                coalesced = false;
                issued.add(issue("batchIsendIrecv", pg::endCoalescing, startNanos));
            }
        } catch (RuntimeException e) {
            if (coalesced) {
                pg.endCoalescing().close();
            }
            finishBatch(ops, staged, issued, false);
            throw e;
        }
        return () -> {
            try {
                waitAll("batchIsendIrecv", issued, startNanos);
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
        if (ringFor(input, input.nbytes())) {
            return ringReduceScatter(input, sizes, op);
        }
        long max = CollectiveShapes.max(sizes);
        long[] offsets = CollectiveShapes.offsets(sizes);
        Tensor x = input.contiguous();
        Tensor padded = x;
        if (!CollectiveShapes.allEqual(sizes)) {
            padded = x.new_zeros(CollectiveShapes.withDim(x, 0, max * size));
            for (int r = 0; r < size; r++) {
                try (Tensor dst = padded.narrow(0, r * max, sizes[r]); Tensor src = x.narrow(0, offsets[r], sizes[r])) {
                    dst.copy_(src);
                }
            }
        }
        Tensor out = x.new_empty(CollectiveShapes.withDim(x, 0, max));
        try (ReduceScatterOptions o = new ReduceScatterOptions(); ReduceOp reduce = reduceOp(op)) {
            o.reduceOp(reduce);
            o.timeout(timeoutMillis);
            Tensor send = padded;
            run("reduceScatterTensor(" + op.shortName() + ")", () -> pg._reduce_scatter_base(out, send, o));
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

    @Override
    public Tensor allToAll(Tensor input, int srcDim, int destDim, long[] srcSizes, long[] destSizes) {
        long[] destOffsets = CollectiveShapes.offsets(destSizes);
        long[] srcOffsets = CollectiveShapes.offsets(srcSizes);
        long rowElements = rowElements(input, destDim);
        long[] sendSplits = new long[size];
        long[] recvSplits = new long[size];
        for (int r = 0; r < size; r++) {
            sendSplits[r] = destSizes[r] * rowElements;
            recvSplits[r] = CollectiveShapes.numel(CollectiveShapes.withDim(CollectiveShapes.withDim(input, destDim, destSizes[rank]), srcDim, srcSizes[r]));
        }
        Tensor send = input.new_empty(CollectiveShapes.sum(sendSplits));
        long position = 0;
        for (int r = 0; r < size; r++) {
            long[] chunkShape = CollectiveShapes.withDim(input, destDim, destSizes[r]);
            try (Tensor flat = send.narrow(0, position, sendSplits[r]); Tensor dst = flat.view(chunkShape);
                 Tensor src = input.narrow(destDim, destOffsets[r], destSizes[r])) {
                dst.copy_(src);
            }
            position += sendSplits[r];
        }
        Tensor recv = input.new_empty(CollectiveShapes.sum(recvSplits));
        try (LongVector outSplits = new LongVector(recvSplits); LongVector inSplits = new LongVector(sendSplits);
             AllToAllOptions o = new AllToAllOptions()) {
            o.timeout(timeoutMillis);
            run("allToAll", () -> pg.alltoall_base(recv, send, outSplits, inSplits, o));
        } catch (RuntimeException e) {
            recv.close();
            throw e;
        } finally {
            send.close();
        }
        long[] outShape = CollectiveShapes.withDim(CollectiveShapes.withDim(input, destDim, destSizes[rank]), srcDim,
            CollectiveShapes.sum(srcSizes));
        Tensor out = input.new_empty(outShape);
        position = 0;
        for (int r = 0; r < size; r++) {
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

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (backendName.equals("nccl")) {
            pg.shutdown(); // NCCL wants its communicators finalized before the group is destroyed
        }
        pg.close();
        closeQuietly(store);
        results.close();
        timeoutMillis.close();
    }

    private static ReduceOp reduceOp(ReduceOpType op) {
        return new ReduceOp(switch (op) {
            case SUM -> ReduceOp.RedOpType.SUM;
            case AVG -> ReduceOp.RedOpType.AVG;
            case MAX -> ReduceOp.RedOpType.MAX;
            case MIN -> ReduceOp.RedOpType.MIN;
            case PRODUCT -> ReduceOp.RedOpType.PRODUCT;
        });
    }

    /** Issues one c10d call and waits for it. */
    private void run(String op, Supplier<Work> call) {
        long startNanos = System.nanoTime();
        try (Work work = issue(op, call, startNanos)) {
            waitAll(op, List.of(work), startNanos);
        }
    }

    private Work issue(String op, Supplier<Work> call, long startNanos) {
        if (closed) {
            throw new IllegalStateException(op + " on " + describe() + ": the group is closed");
        }
        try {
            return call.get();
        } catch (RuntimeException e) {
            throw translate(op, e, startNanos);
        }
    }

    /** Waits for every issued piece of work, in order; each wait is bounded by the Gloo timeout. */
    private void waitAll(String op, List<Work> issued, long startNanos) {
        for (Work work : issued) {
            try {
                work._wait();
            } catch (RuntimeException e) {
                throw translate(op, e, startNanos);
            }
        }
    }

    /** A c10d failure as a {@link CommException}; {@link ThreadGroup} adds the operation and group. */
    private CommException translate(String op, RuntimeException e, long startNanos) {
        return translate(backendName, op, describe(), timeout, e, startNanos);
    }

    /**
     * The one place native c10d errors are caught: their kind is recorded here, once (decision 162). JavaCPP
     * turns every C++ exception into a plain {@link RuntimeException} carrying only {@code what()}, so the
     * kind is decided by the clock, not by the words of the message: a call that failed after its whole
     * timeout had passed since it was issued is {@link FailureKind#TIMEOUT} (c10d starts its own timer later
     * than {@code startNanos}, so its timeout always fires past that point), anything sooner is
     * {@link FailureKind#COMMUNICATION}.
     */
    private static CommException translate(String backendName, String op, String described, Duration timeout,
                                           RuntimeException e, long startNanos) {
        return translate(backendName, op, null, described, timeout, e, startNanos);
    }

    /** {@link #translate(String, String, String, Duration, RuntimeException, long)}, naming {@code waitingFor} when not null. */
    private static CommException translate(String backendName, String op, String waitingFor, String described, Duration timeout,
                                           RuntimeException e, long startNanos) {
        String message = String.valueOf(e.getMessage());
        int firstLine = message.indexOf('\n');
        // Drop the "[/path/to/source.cc:78] " prefix of c10 errors.
        String c10dMessage = (firstLine < 0 ? message : message.substring(0, firstLine)).replaceFirst("^\\[[^\\]]*\\]\\s*", "");
        String prefix = op.equals("connect") ? "connect to " + described + ": " : "";
        long waitedNanos = System.nanoTime() - startNanos;
        if (waitedNanos >= Duration.ofMillis(timeout.toMillis()).toNanos()) {
            return new CommTimeoutException(prefix + Deadline.after(timeout).timedOutAfter()
                + " waiting for " + (waitingFor == null ? "the other ranks" : waitingFor) + " (" + backendName + ": " + c10dMessage + ")", e);
        }
        return new CommException(FailureKind.COMMUNICATION, prefix + backendName + " failed"
            + (waitingFor == null ? "" : " in " + waitingFor) + ": " + c10dMessage, e);
    }

    private String describe() {
        return describe(groupName, rank, size, backendName, rendezvous);
    }

    private static String describe(String groupName, int rank, int size, String backendName, RendezvousAddress rendezvous) {
        return "group " + groupName + " (rank " + rank + " of " + size + ", " + backendName
            + (rendezvous == null ? "" : " over the rendezvous " + rendezvous) + ")";
    }

    /**
     * The Gloo transport devices of this JVM, one per CPU device id, shared by every group that device's rank
     * joins. Each device runs one TCP event loop: with a single device for the JVM, the ranks' loops were one
     * thread that every byte of every rank went through (decision 191). They live as long as the JVM.
     */
    private static final class GlooDevice {
        private static final java.util.concurrent.ConcurrentHashMap<Long, org.bytedeco.pytorch.gloo.Device> DEVICES =
            new java.util.concurrent.ConcurrentHashMap<>();

        /** How many CPU devices of this JVM joined a Gloo group: at most that many ranks copy at once. */
        static int count() {
            return DEVICES.size();
        }

        static org.bytedeco.pytorch.gloo.Device forCpuDevice(long deviceId) {
            return DEVICES.computeIfAbsent(deviceId,
                id -> ProcessGroupGloo.createDeviceForHostname(System.getProperty(HOSTNAME_PROPERTY, DEFAULT_HOSTNAME)));
        }
    }
}
