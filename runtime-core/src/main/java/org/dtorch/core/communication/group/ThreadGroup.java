package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.device.Nvtx;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.StreamTimeline;
import org.dtorch.core.trace.Tracer;

/**
 * Collectives over a group of devices, one instance per rank (docs/communication-core.md, "ThreadGroup"). The kernels of the
 * distributed tensor layer call it to move between placements: {@code allReduce} for P to R,
 * {@code allGather*} for S to R, {@code reduceScatterTensor} for P to S(0), {@code allToAll} for S(i) to
 * S(j) and {@code replicateToShard} for R to S.
 *
 * <p>The backend is chosen at construction: the same-device backend on {@link TensorStore} when
 * {@code sameDevice} is true (several ranks simulate devices on one; a memory store when the ranks are
 * threads of one process, a File store when they are processes), else c10d Gloo for CPU devices and
 * c10d NCCL for CUDA devices.
 *
 * <p>On CUDA, collectives are issued to the calling thread's current stream of the rank's device and are
 * ordered with it: the result may still be in flight when a method returns, and work issued later on that
 * stream sees it. {@link #setStream(DeviceStream)} makes a stream current.
 *
 * <p>Shards follow the balanced split ({@link BalancedSplit}): a dimension of {@code n} elements over
 * {@code size} ranks gives rank {@code r} {@code BalancedSplit.size(n, size, r)} of them, none for the last ranks when
 * {@code n < size}: every collective takes zero-size inputs and gives zero-size results. Every method
 * checks its input (device, dims, sizes against the split, reduce op against dtype) before any
 * communication and fails with an {@link IllegalArgumentException} naming the operation, the rank and the
 * value. Every method is synchronous and returns a new tensor, and inputs are never modified, except the per-rank
 * primitives of TeleFuser (docs/communication-core.md, "Per-rank primitives"): {@link #allReduceSum_} and
 * {@link #recv} write into their arguments, and {@link #batchIsendIrecv} returns before its transfers complete.
 *
 * <p>A collective that failed in communication (timeout, peer error) leaves the peers at an unknown
 * point of the protocol, so the group refuses further collectives with a message naming that failure;
 * create a new group.
 *
 * <p>{@link #abort(String)} is how a runtime that shuts down frees ranks blocked in a collective that will
 * never complete: it makes the instance refuse every further call and releases its backend at once if no
 * collective runs on it, which breaks the connections its peers wait on (a Gloo rank whose peer's group is
 * destroyed fails within milliseconds with "connection closed by peer").
 *
 * <p>Not thread-safe, except {@link #abort(String)}: one thread per rank calls its instance; the ranks'
 * instances are used concurrently, and every rank calls the same collectives in the same order.
 * {@link #abort(String)} may be called from any thread at any time.
 */
public final class ThreadGroup implements AutoCloseable {
    /** The trace's name of a sum over the ranks, issued and awaited or not. */
    private static final String TRACED_SUM = "allReduce(sum)";
    /** The trace's name of the wait for a sum issued earlier. */
    private static final String WAIT_SUM = "wait " + TRACED_SUM;

    private final ThreadGroupKey key;
    private final int rank;
    private final int size;
    private final boolean sameDevice;
    private final CollectiveBackend backend;
    private final CollectiveCounter counter;
    private DeviceStream stream;
    /** Held while a collective runs or the backend closes; {@link #abort} only takes it when free. */
    private final ReentrantLock inUse = new ReentrantLock();
    private String brokenBy;
    private volatile String abortedBy;
    private volatile boolean closed;

    /**
     * Joins a group. Blocks until every rank has joined (or the global communication timeout).
     *
     * @param initPath           a name all ranks share and no other group uses, such as
     *                           {@code <instance id>/cpu-0_1_2_3}; it names the rendezvous file or store key
     * @param kind               the device kind of every rank
     * @param allGlobalDeviceIds the device ids of the ranks, in rank order
     * @param rank               this rank
     * @param size               the number of ranks; equals {@code allGlobalDeviceIds.size()}
     * @param sameDevice         true when the ranks share one physical device (single-device simulation)
     */
    public ThreadGroup(String initPath, DeviceKind kind, List<Long> allGlobalDeviceIds, int rank, int size, boolean sameDevice) {
        this(initPath, kind, allGlobalDeviceIds, rank, size, sameDevice, CommOptions.global().timeout());
    }

    /** As {@link #ThreadGroup(String, DeviceKind, List, int, int, boolean)}, with an explicit deadline for every call. */
    public ThreadGroup(String initPath, DeviceKind kind, List<Long> allGlobalDeviceIds, int rank, int size, boolean sameDevice,
                       Duration timeout) {
        this(initPath, kind, allGlobalDeviceIds, rank, size, sameDevice, timeout, new CollectiveCounter(), null);
    }

    /**
     * As above, counting every collective in {@code counter} (shared by a manager's groups); Gloo and NCCL ranks meet at
     * {@code rendezvous} (ranks on several hosts), or in a FileStore named by {@code initPath} when it is null.
     */
    ThreadGroup(String initPath, DeviceKind kind, List<Long> allGlobalDeviceIds, int rank, int size, boolean sameDevice,
                Duration timeout, CollectiveCounter counter, RendezvousAddress rendezvous) {
        this.counter = java.util.Objects.requireNonNull(counter, "counter");
        if (initPath == null || initPath.isBlank()) {
            throw new IllegalArgumentException("initPath must be a non-blank name shared by the ranks, got "
                + (initPath == null ? "null" : "'" + initPath + "'"));
        }
        this.key = new ThreadGroupKey(kind, allGlobalDeviceIds);
        if (size != key.size()) {
            throw new IllegalArgumentException("group " + key + ": size " + size + " does not match the " + key.size() + " device ids");
        }
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("group " + key + ": rank must be in [0, " + size + "), got " + rank);
        }
        CommOptions.validateTimeout(timeout);
        this.rank = rank;
        this.size = size;
        this.sameDevice = sameDevice;
        this.backend = sameDevice ? sameDeviceBackend(initPath, timeout) : distinctDeviceBackend(initPath, rendezvous, timeout);
    }

    private CollectiveBackend sameDeviceBackend(String initPath, Duration timeout) {
        DeviceStream defaultStream = DeviceStream.of(rankDevice());
        // As DTorch's same-device backend: threads of one process share memory, processes share /dev/shm.
        int slash = initPath.indexOf('/');
        String instance = slash > 0 ? initPath.substring(0, slash) : GlobalCommInstanceId.processPrefix();
        TensorStore store = TensorStore.createForParticipants(TensorStoreCreateInfo.builder()
            .type(TensorStoreType.MEMORY).storeKey(initPath).worldSize(size).rank(rank).timeout(timeout).instanceId(instance).build());
        this.stream = defaultStream;
        return new SameDeviceBackend(store, key.toString(), defaultStream);
    }

    private CollectiveBackend distinctDeviceBackend(String initPath, RendezvousAddress rendezvous, Duration timeout) {
        return switch (key.kind()) {
            case CPU -> {
                this.stream = DeviceStream.of(new Device(DeviceKind.CPU, Math.toIntExact(key.deviceIds().get(rank))));
                yield C10dBackend.gloo(initPath, rendezvous, key.toString(), rank, size, timeout, key.deviceIds().get(rank));
            }
            case CUDA -> {
                Device device = rankDevice();
                this.stream = DeviceStream.of(device);
                yield C10dBackend.nccl(initPath, rendezvous, key.toString(), rank, size, timeout, device);
            }
        };
    }

    /**
     * The device this rank's memory and stream are on: the CPU device of its id, or, on CUDA, the calling thread's
     * current CUDA device (as in torch.distributed, each rank's thread sets its GPU first; several ranks of the
     * same-device backend share one). The logical device ids of the key only name the ranks.
     */
    private Device rankDevice() {
        return key.kind() == DeviceKind.CUDA ? Cuda.currentDevice() : new Device(DeviceKind.CPU, Math.toIntExact(key.deviceIds().get(rank)));
    }

    /** This rank, in {@code [0, size)}. */
    public int getRank() {
        return rank;
    }

    /** The number of ranks. */
    public int getWorldSize() {
        return size;
    }

    /** The global device id of this rank. */
    public long getGlobalDeviceId() {
        return key.deviceIds().get(rank);
    }

    /** The group's key (device kind and device ids). */
    public ThreadGroupKey key() {
        return key;
    }

    /** {@code gloo} or {@code same-device}. */
    public String backendName() {
        return backend.name();
    }

    /** True when the ranks share one device and use the same-device backend. */
    public boolean isSameDevice() {
        return sameDevice;
    }

    /** The stream later collectives synchronize with; on CUDA it becomes the calling thread's current stream. */
    public void setStream(DeviceStream s) {
        Objects.requireNonNull(s, "stream");
        if (s.device().kind() != key.kind()) {
            throw new IllegalArgumentException(where("setStream") + ": stream " + s + " is not on a " + key.kind().shortName() + " device");
        }
        ensureUsable("setStream");
        this.stream = s;
        s.makeCurrent();
        backend.setStream(s);
    }

    /** The stream set last (initially the device's default stream). */
    public DeviceStream stream() {
        return stream;
    }

    /** Blocks until every rank called it. */
    public void barrier() {
        communicate("barrier", CollectiveKind.BARRIER, () -> {
            backend.barrier();
            return null;
        });
    }

    /** P to R with SUM: every rank gets the element-wise sum of all inputs. */
    public Tensor allReduce(Tensor input) {
        return allReduce(input, ReduceOpType.SUM);
    }

    /** P to R: every rank gets the element-wise reduction of all inputs; AVG needs a floating-point input. */
    public Tensor allReduce(Tensor input, ReduceOpType op) {
        String op0 = "allReduce(" + (op == null ? "null" : op.shortName()) + ")";
        checkTensor(op0, input);
        checkReduceOp(op0, input, op);
        if (size == 1) {
            return localCopy(input, op0);
        }
        return communicate(op0, CollectiveKind.ALL_REDUCE, input,
            () -> keepingNaN(input, op, () -> backend.allReduce(input, op), mask -> backend.allReduce(mask, ReduceOpType.MAX)));
    }

    /**
     * {@code collective}'s result, with NaN wherever some rank's input held NaN for a MAX or MIN of floating values, as
     * torch's maximum, amax and amin propagate it: the backends' reductions (Gloo's among them) keep a number there. A 0/1
     * mask of each rank's NaN positions is reduced with MAX by {@code maskCollective}, the same collective, within the
     * same call; other operators and dtypes take {@code collective} alone.
     */
    private static Tensor keepingNaN(Tensor input, ReduceOpType op, Supplier<Tensor> collective, UnaryOperator<Tensor> maskCollective) {
        Tensor result = collective.get();
        if (op != ReduceOpType.MAX && op != ReduceOpType.MIN || !input.is_floating_point()) {
            return result;
        }
        try (Tensor nan = input.isnan(); Tensor mask = nan.to(TorchTensors.dtype(input)); Tensor anywhere = maskCollective.apply(mask);
             Tensor where = anywhere.to(ScalarType.Bool); Scalar notANumber = new Scalar(Double.NaN)) {
            result.masked_fill_(where, notANumber);
        } catch (RuntimeException e) {
            result.close();
            throw e;
        }
        return result;
    }

    /** Gathers equal-shaped inputs along dim 0: the result has {@code size * input.size(0)} rows. */
    public Tensor equalShapeAllGatherIntoTensor(Tensor input) {
        String op = "equalShapeAllGatherIntoTensor";
        checkTensor(op, input);
        checkDim(op, input, 0, "gather dim");
        long[] sizes = new long[size];
        Arrays.fill(sizes, input.size(0));
        if (size == 1) {
            return localCopy(input, op);
        }
        return communicate(op, CollectiveKind.ALL_GATHER, input, () -> backend.allGather(input, 0, sizes));
    }

    /** S(0) to R: gathers balanced shards of a dimension of {@code gatheredDimSize} rows along dim 0. */
    public Tensor allGatherIntoTensor(Tensor input, long gatheredDimSize) {
        return allGather(input, 0, gatheredDimSize, "allGatherIntoTensor");
    }

    /** S(d) to R: gathers balanced shards of a dimension of {@code gatheredDimSize} elements along {@code shardDim}. */
    public Tensor allGather(Tensor input, int shardDim, long gatheredDimSize) {
        return allGather(input, shardDim, gatheredDimSize, "allGather");
    }

    private Tensor allGather(Tensor input, int shardDim, long gatheredDimSize, String op) {
        long[] sizes = checkShard(op, input, shardDim, gatheredDimSize);
        if (size == 1) {
            return localCopy(input, op);
        }
        return communicate(op, CollectiveKind.ALL_GATHER, input, () -> backend.allGather(input, shardDim, sizes));
    }

    /** S(d) to R, keeping the shards apart: every rank's shard, in rank order. */
    public List<Tensor> allGatherIntoVec(Tensor input, int shardDim, long gatheredDimSize) {
        String op = "allGatherIntoVec";
        long[] sizes = checkShard(op, input, shardDim, gatheredDimSize);
        if (size == 1) {
            return List.of(localCopy(input, op));
        }
        return communicate(op, CollectiveKind.ALL_GATHER, input, () -> backend.allGatherIntoVec(input, shardDim, sizes));
    }

    /** P to S(0): the reduction of all inputs, of which this rank keeps its balanced share of dim 0. */
    public Tensor reduceScatterTensor(Tensor input, ReduceOpType op) {
        return reduceScatterTensor(input, 0, op);
    }

    /** P to S(d): the reduction of all inputs, of which this rank keeps its balanced share of {@code scatterDim}. */
    public Tensor reduceScatterTensor(Tensor input, int scatterDim, ReduceOpType op) {
        String op0 = "reduceScatterTensor(" + (op == null ? "null" : op.shortName()) + ")";
        checkTensor(op0, input);
        checkReduceOp(op0, input, op);
        checkDim(op0, input, scatterDim, "scatter dim");
        long[] sizes = checkSplit(op0, input, scatterDim, input.size(scatterDim));
        if (size == 1) {
            return localCopy(input, op0);
        }
        return communicate(op0, CollectiveKind.REDUCE_SCATTER, input, () -> keepingNaN(input, op,
            () -> backend.reduceScatter(input, scatterDim, sizes, op), mask -> backend.reduceScatter(mask, scatterDim, sizes, ReduceOpType.MAX)));
    }

    /**
     * S(srcDim) to S(destDim): this rank holds its balanced share of {@code srcGatheredDimSize} on
     * {@code srcDim}; it gets the whole of {@code srcDim} and its balanced share of {@code destDim}.
     */
    public Tensor allToAll(Tensor input, int srcDim, int destDim, long srcGatheredDimSize) {
        String op = "allToAll(" + srcDim + " -> " + destDim + ")";
        long[] srcSizes = checkShard(op, input, srcDim, srcGatheredDimSize);
        checkDim(op, input, destDim, "destDim");
        if (srcDim == destDim) {
            throw new IllegalArgumentException(where(op) + ": srcDim and destDim are both " + srcDim + "; nothing to exchange");
        }
        long[] destSizes = checkSplit(op, input, destDim, input.size(destDim));
        if (size == 1) {
            return localCopy(input, op);
        }
        return communicate(op, CollectiveKind.ALL_TO_ALL, input, () -> backend.allToAll(input, srcDim, destDim, srcSizes, destSizes));
    }

    /** R to S(d): this rank's balanced share of {@code shardDim}, copied. No communication. */
    public Tensor replicateToShard(Tensor input, int shardDim) {
        String op = "replicateToShard";
        checkTensor(op, input);
        checkDim(op, input, shardDim, "shardDim");
        checkSplit(op, input, shardDim, input.size(shardDim));
        ensureUsable(op);
        long offset = BalancedSplit.offset(input.size(shardDim), size, rank);
        long length = BalancedSplit.size(input.size(shardDim), size, rank);
        try (Tensor view = input.narrow(shardDim, offset, length)) {
            return view.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
        }
    }

    /**
     * Every rank's {@code local}, equal shapes, stacked in rank order into one new contiguous tensor
     * {@code [world, D0, ...]}: one all-gather into one allocation, no per-rank tensor (TeleFuser's
     * {@code all_gather_stacked}). The shapes are not exchanged first: on c10d a different element count fails in the
     * backend, while the same-device backend checks dtype and shape on every rank.
     */
    public Tensor allGatherStacked(Tensor local) {
        String op = "allGatherStacked";
        checkTensor(op, local);
        if (size == 1) {
            ensureUsable(op);
            try (Tensor one = local.unsqueeze(0)) {
                return one.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
            }
        }
        return communicate(op, CollectiveKind.ALL_GATHER, local, () -> backend.allGatherStacked(local));
    }

    /**
     * Every rank's {@code local} concatenated in rank order along {@code dim} (negative counts from the end), sizes on
     * {@code dim} free (TeleFuser's {@code all_gather_cat}). The ranks first gather each other's dtype and shape, so a
     * disagreement on anything but {@code dim} fails on every rank alike before any value moves; the values then travel
     * padded to the largest size on {@code dim} and are cropped (on Gloo from 1 MiB in all, round its ring as they are).
     */
    public Tensor allGatherCat(Tensor local, int dim) {
        String op = "allGatherCat(dim " + dim + ")";
        checkTensor(op, local);
        int d = dim < 0 ? dim + (int) local.dim() : dim;
        checkDim(op, local, d, "cat dim");
        if (size == 1) {
            return localCopy(local, op);
        }
        long[] sizes;
        try (Tensor description = PeerShapes.describe(where(op), local)) {
            sizes = PeerShapes.sizesOnDim(where(op), local, d,
                communicate(op, CollectiveKind.ALL_GATHER, description, () -> backend.allGatherStacked(description)));
        }
        return communicate(op, CollectiveKind.ALL_GATHER, local, () -> backend.allGather(local, d, sizes));
    }

    /**
     * Sums each of {@code tensors} over the ranks, in place (TeleFuser's {@code all_reduce_sum_}): independent
     * reductions, all submitted before any is awaited; across devices the small tensors of one dtype travel together in
     * flat buckets ({@link ReductionBuckets}), as a data-parallel step's gradients do. Every rank passes the same number
     * of tensors, matching in dtype and shape position by position.
     */
    public void allReduceSum_(Tensor... tensors) {
        checkReduceSum("allReduceSum_", tensors);
        if (size == 1) {
            ensureUsable("allReduceSum_");
            return;
        }
        communicate("allReduceSum_", CollectiveKind.ALL_REDUCE, tensors, () -> {
            backend.allReduceSumInPlace(tensors.clone());
            return null;
        });
    }

    /**
     * {@link #allReduceSum_}, issued and not awaited where the backend runs collectives in the background (c10d Gloo and
     * NCCL): the rank's thread goes on with other work, and other collectives of the group, while the sums travel, and
     * {@link ReductionWork#await()} waits for them where they are read. The same-device backend reduces at once. The
     * tensors are checked before anything is issued, as {@link #allReduceSum_} checks them; until the work is awaited they
     * are neither read, written nor closed. A failure of the reduction, seen by {@code await}, makes the group unusable,
     * as a failed collective does.
     */
    public ReductionWork allReduceSumAsync_(Tensor... tensors) {
        String op = "allReduceSumAsync_";
        checkReduceSum(op, tensors);
        long bytes = contributedBytes(tensors);
        String what = where(op) + ": " + tensors.length + " tensor(s) of " + bytes + " bytes";
        if (size == 1) {
            ensureUsable(op);
            return ReductionWork.completed(what);
        }
        Tensor[] mine = tensors.clone();
        // Traced as the all-reduce it is, with its bytes, where it is issued; its completion as a wait of no bytes.
        Runnable completion = communicate(TRACED_SUM, CollectiveKind.ALL_REDUCE, tensors, () -> backend.allReduceSumInPlaceAsync(mine));
        String awaited = WAIT_SUM + " (" + op + " of " + tensors.length + " tensor(s), " + bytes + " bytes)";
        return new ReductionWork(body -> awaitIssued(awaited, WAIT_SUM, body), completion, what);
    }

    /**
     * Runs the completion of a collective issued earlier with the group's error context. When the group became unusable
     * meanwhile (aborted, closed or broken), the completion still runs, so that it releases its buffers and c10d's work
     * (whose waits end once the backend is gone), and the group's refusal is what the caller gets.
     */
    private void awaitIssued(String op, String traced, Runnable completion) {
        boolean[] ran = new boolean[1];
        try {
            communicate(op, traced, null, null, () -> {
                ran[0] = true;
                completion.run();
                return null;
            });
        } catch (RuntimeException e) {
            if (!ran[0]) {
                try {
                    completion.run();
                } catch (RuntimeException released) {
                    e.addSuppressed(released);
                }
            }
            throw e;
        }
    }

    private void checkReduceSum(String op, Tensor[] tensors) {
        if (tensors == null || tensors.length == 0) {
            throw new IllegalArgumentException(where(op) + ": no tensors");
        }
        for (int i = 0; i < tensors.length; i++) {
            checkTensor(op + " tensor " + i, tensors[i]);
            for (int j = 0; j < i; j++) {
                if (TorchTensors.address(tensors[j]) == TorchTensors.address(tensors[i]) && tensors[i].numel() > 0) {
                    throw new IllegalArgumentException(where(op) + ": tensors " + j + " and " + i + " share their data ("
                        + TorchTensors.describe(tensors[i]) + "); each would be summed twice");
                }
            }
        }
    }

    /**
     * Sends {@code tensor} to the group-local rank {@code dstRank}, which calls {@link #recv} (or an
     * {@link P2POp#irecv} in a batch) with a tensor of the same dtype and shape. Blocks until the peer has taken it,
     * within the group's timeout; a timeout names the peer and the shape.
     */
    public void send(Tensor tensor, int dstRank) {
        P2PWork work = batchIsendIrecv(List.of(P2POp.isend(tensor, dstRank)), "send");
        work.await();
    }

    /**
     * Receives into {@code into} what the group-local rank {@code srcRank} sends. Blocks until it has arrived, within
     * the group's timeout; a timeout names the peer and the shape.
     */
    public void recv(Tensor into, int srcRank) {
        P2PWork work = batchIsendIrecv(List.of(P2POp.irecv(into, srcRank)), "recv");
        work.await();
    }

    /**
     * Issues every send and receive of {@code ops} at once and returns one handle for all (c10d's
     * {@code batch_isend_irecv}): on NCCL one coalesced launch, on Gloo each progressed in the background, on the
     * same-device backend in memory. Sends to and receives from one peer match its calls in order. Every op is
     * validated before any is issued.
     */
    public P2PWork batchIsendIrecv(List<P2POp> ops) {
        return batchIsendIrecv(ops, "batchIsendIrecv");
    }

    private P2PWork batchIsendIrecv(List<P2POp> ops, String name) {
        if (ops == null || ops.isEmpty()) {
            throw new IllegalArgumentException(where(name) + ": no operations");
        }
        List<P2POp> batch = List.copyOf(ops);
        batch.forEach(p -> checkPeerOp(name, p));
        String op = P2POp.describe(name, batch);
        Runnable completion = communicate(op, CollectiveKind.POINT_TO_POINT, batch, () -> backend.batchIsendIrecv(batch));
        return new P2PWork(body -> communicate(op, null, () -> {
            body.run();
            return null;
        }), completion);
    }

    private void checkPeerOp(String op, P2POp p) {
        if (p == null || p.kind() == null) {
            throw new IllegalArgumentException(where(op) + ": operation " + p + " has no kind");
        }
        checkTensor(op, p.tensor());
        if (p.peer() < 0 || p.peer() >= size || p.peer() == rank) {
            throw new IllegalArgumentException(where(op) + ": peer rank " + p.peer() + " of " + TorchTensors.describe(p.tensor())
                + " must be another rank of the group, in [0, " + size + ") but not " + rank);
        }
    }

    /** Leaves the group and releases its backend. Idempotent. */
    @Override
    public void close() {
        inUse.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            backend.close();
        } finally {
            inUse.unlock();
        }
    }

    /**
     * Makes this instance refuse every further call (naming {@code reason}), and releases its backend now
     * unless a collective is running on it. Call it again once that collective has returned (it fails
     * quickly once the peers' instances are released). Idempotent.
     *
     * @return true once the backend is released; false while a collective still runs on it
     */
    public boolean abort(String reason) {
        Objects.requireNonNull(reason, "reason");
        if (abortedBy == null) {
            abortedBy = reason;
        }
        if (!inUse.tryLock()) {
            return false;
        }
        try {
            close();
            return true;
        } finally {
            inUse.unlock();
        }
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "ThreadGroup{" + key + ", rank " + rank + " of " + size + ", " + backend.name() + "}";
    }

    /** {@link #communicate(String, CollectiveKind, Object, Supplier)} with no input to count the bytes of. */
    private <T> T communicate(String op, CollectiveKind kind, Supplier<T> body) {
        return communicate(op, kind, null, body);
    }

    /**
     * Runs one collective, counted as {@code kind} (null: the completion of one already counted) and traced with the
     * bytes this rank contributes ({@link #contributedBytes} of {@code input}); a communication failure gets the group's
     * context and poisons the group.
     */
    private <T> T communicate(String op, CollectiveKind kind, Object input, Supplier<T> body) {
        return communicate(op, op, kind, input, body);
    }

    /**
     * {@link #communicate(String, CollectiveKind, Object, Supplier)} traced as {@code traced} rather than {@code op}: a
     * wait's errors say what it waits for, its trace span only which collective.
     */
    private <T> T communicate(String op, String traced, CollectiveKind kind, Object input, Supplier<T> body) {
        inUse.lock();
        try {
            ensureUsable(op);
            if (kind != null) {
                counter.record(kind);
            }
            long started = Tracer.now();
            T result = started != 0 && key.kind() == DeviceKind.CUDA ? runTracedOnCuda(op, started, body) : runNamed(op, body);
            if (started != 0) {
                Tracer.collective(traced, kind, backend.name(), contributedBytes(input), key.deviceIds(), started);
            }
            return result;
        } finally {
            inUse.unlock();
        }
    }

    /**
     * The bytes a rank contributes with {@code input}: a tensor's, the sum of an array's ({@link #allReduceSum_}), or
     * what a point-to-point batch sends (its receives are counted by their senders); 0 for null (barriers, completions).
     */
    private static long contributedBytes(Object input) {
        return switch (input) {
            case null -> 0;
            case Tensor tensor -> tensor.nbytes();
            case Tensor[] tensors -> Arrays.stream(tensors).mapToLong(Tensor::nbytes).sum();
            case List<?> batch -> batch.stream().map(P2POp.class::cast).filter(p -> p.kind() == P2POp.Kind.ISEND)
                .mapToLong(p -> p.tensor().nbytes()).sum();
            default -> throw new IllegalArgumentException("no byte count for " + input.getClass().getName());
        };
    }

    /**
     * {@link #runNamed} while tracing on CUDA: an NVTX range, and on a worker's thread a span of its collectives'
     * {@link StreamTimeline} (events on the current stream, which the collective leaves waiting for its completion).
     */
    private <T> T runTracedOnCuda(String op, long traced, Supplier<T> body) {
        StreamTimeline timeline = StreamTimeline.collectivesOfThisThread();
        Nvtx.rangePush(op);
        StreamTimeline.Span span = timeline == null ? null : timeline.begin(traced);
        try {
            return runNamed(op, body);
        } finally {
            try {
                if (timeline != null) {
                    timeline.end(span, 0, op);
                }
            } finally {
                Nvtx.rangePop();
            }
        }
    }

    private <T> T runNamed(String op, Supplier<T> body) {
        try {
            return body.get();
        } catch (CommTimeoutException e) {
            CommTimeoutException named = new CommTimeoutException(where(op) + ": " + e.getMessage(), e);
            brokenBy = named.getMessage();
            throw named;
        } catch (CommInterruptedException e) {
            brokenBy = where(op) + ": " + e.getMessage();
            throw e;
        } catch (CommException e) {
            String aborting = abortedBy != null ? " (the group was being aborted: " + abortedBy + ")" : "";
            CommException named = new CommException(e.kind(), where(op) + ": " + e.getMessage() + aborting, e);
            brokenBy = named.getMessage();
            throw named;
        }
    }

    private void ensureUsable(String op) {
        String aborted = abortedBy;
        if (aborted != null) {
            throw new CommException(where(op) + ": the group was aborted: " + aborted);
        }
        if (closed) {
            throw new IllegalStateException(where(op) + ": the group is closed");
        }
        if (brokenBy != null) {
            throw new CommException(where(op) + ": the group is unusable after an earlier communication failure: " + brokenBy);
        }
    }

    private Tensor localCopy(Tensor input, String op) {
        ensureUsable(op);
        return input.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
    }

    private void checkTensor(String op, Tensor input) {
        if (input == null || input.isNull() || !input.defined()) {
            throw new IllegalArgumentException(where(op) + ": input is " + TorchTensors.describe(input));
        }
        if (TorchTensors.deviceKind(input) != key.kind()) {
            throw new IllegalArgumentException(where(op) + ": input is " + TorchTensors.describe(input) + " but the group's devices are "
                + key.kind().shortName());
        }
    }

    private void checkReduceOp(String op, Tensor input, ReduceOpType reduceOp) {
        if (reduceOp == null) {
            throw new IllegalArgumentException(where(op) + ": reduce op is null");
        }
        if (reduceOp == ReduceOpType.AVG && !input.is_floating_point()) {
            throw new IllegalArgumentException(where(op) + ": AVG needs a floating-point input, got " + TorchTensors.describe(input)
                + "; reduce with SUM and divide");
        }
    }

    private void checkDim(String op, Tensor input, int dim, String what) {
        if (dim < 0 || dim >= input.dim()) {
            throw new IllegalArgumentException(where(op) + ": " + what + " " + dim + " is out of range for input "
                + TorchTensors.describe(input) + " (valid: 0.." + (input.dim() - 1) + ")");
        }
    }

    /**
     * Sizes of the balanced split of {@code dimSize} over the group, with a message naming the operation. A dimension
     * shorter than the group gives the last ranks empty shares.
     */
    private long[] checkSplit(String op, Tensor input, int dim, long dimSize) {
        if (dimSize < 0) {
            throw new IllegalArgumentException(where(op) + ": dimension " + dim + " has the negative size " + dimSize + " (input "
                + TorchTensors.describe(input) + ")");
        }
        return BalancedSplit.sizes(dimSize, size);
    }

    /** Checks that {@code input} is this rank's balanced shard of {@code gatheredDimSize} on {@code dim}. */
    private long[] checkShard(String op, Tensor input, int dim, long gatheredDimSize) {
        checkTensor(op, input);
        checkDim(op, input, dim, "shard dim");
        long[] sizes = checkSplit(op, input, dim, gatheredDimSize);
        if (input.size(dim) != sizes[rank]) {
            throw new IllegalArgumentException(where(op) + ": input " + TorchTensors.describe(input) + " has " + input.size(dim)
                + " elements on dim " + dim + ", but rank " + rank + "'s balanced share of " + gatheredDimSize + " over " + size
                + " ranks is " + sizes[rank] + " (shares: " + Arrays.toString(sizes) + ")");
        }
        return sizes;
    }

    private String where(String op) {
        return op + " on group " + key + " (rank " + rank + " of " + size + (backend == null ? "" : ", " + backend.name()) + ")";
    }
}
