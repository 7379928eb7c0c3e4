package org.dtorch.core.communication.group;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceStream;

/**
 * The engine under a {@link ThreadGroup}, the analogue of {@code c10d::Backend} in DTorch. DTorch's
 * same-device backend subclasses {@code c10d::Backend} in C++; from Java this interface plays that role
 * and one implementation wraps c10d's {@code ProcessGroupGloo}.
 *
 * <p>Callers ({@link ThreadGroup}) have validated every argument: dims are in range, sizes come from the
 * balanced split and match the local tensor. Every method is collective: all ranks call it in the same
 * order. Every returned tensor is new; inputs are never modified.
 *
 * <p>Not thread-safe: one rank's thread uses its backend instance.
 */
interface CollectiveBackend extends AutoCloseable {

    /** A short name for messages: {@code gloo} or {@code same-device}. */
    String name();

    /** The stream that later collectives synchronize with. */
    void setStream(DeviceStream stream);

    /** Blocks until every rank arrived. */
    void barrier();

    /** Element-wise reduction over the ranks; every rank gets the result. */
    Tensor allReduce(Tensor input, ReduceOpType op);

    /** Concatenation along {@code dim} of every rank's input, where rank r's size on {@code dim} is {@code sizes[r]}. */
    Tensor allGather(Tensor input, int dim, long[] sizes);

    /** Every rank's input, in rank order. */
    List<Tensor> allGatherIntoVec(Tensor input, int dim, long[] sizes);

    /** Reduction over the ranks of the full input, of which this rank keeps its {@code sizes[rank]} slices of {@code dim}. */
    Tensor reduceScatter(Tensor input, int dim, long[] sizes, ReduceOpType op);

    /**
     * Re-sharding from {@code srcDim} (this rank holds {@code srcSizes[rank]}) to {@code destDim} (this rank
     * gets {@code destSizes[rank]} and the whole of {@code srcDim}).
     */
    Tensor allToAll(Tensor input, int srcDim, int destDim, long[] srcSizes, long[] destSizes);

    /** Every rank's equal-shaped input in one new contiguous allocation {@code [size, ...input shape]}, in rank order. */
    Tensor allGatherStacked(Tensor input);

    /** Sums every tensor over the ranks in place; every reduction is submitted before any is awaited. */
    void allReduceSumInPlace(Tensor[] tensors);

    /**
     * {@link #allReduceSumInPlace}, issued: the returned completion blocks, within the timeout, until the sums are in
     * {@code tensors}, and releases what the reduction held whether it succeeds or not. Until it has run the tensors are
     * neither read, written nor closed. The default reduces at once and returns a completion with nothing left to do:
     * a backend whose reduction is the caller's own work (the same-device backend's host reduction) has nothing to
     * overlap it with.
     */
    default Runnable allReduceSumInPlaceAsync(Tensor[] tensors) {
        allReduceSumInPlace(tensors);
        return () -> { };
    }

    /**
     * Issues every operation of a batch (peers are validated, group-local and not this rank) and returns what
     * completes the batch: it blocks, within the timeout, until every send was taken and every receive landed.
     */
    Runnable batchIsendIrecv(List<P2POp> ops);

    /** Releases native resources. Idempotent. */
    @Override
    void close();
}
