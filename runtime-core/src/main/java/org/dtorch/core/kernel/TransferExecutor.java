package org.dtorch.core.kernel;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.distributed.CrossMeshTransfer;
import org.dtorch.core.distributed.ShardLayout;

/**
 * Runs a {@link CrossMeshTransfer} on one device through the operation's {@link TensorStore}: publish every
 * piece this device sends (a zero-copy view, one consumer each), copy every piece it receives into its
 * result, then wait until its own pieces were taken. Every device of either mesh takes part (the store's
 * creation is a barrier).
 *
 * <p>Not thread-safe: one device thread per call.
 */
final class TransferExecutor {

    private TransferExecutor() {
    }

    /**
     * Moves this device's share.
     *
     * @param local  this device's tensor under the source layout, or null if it is not in the source mesh
     * @param into   where to write the result (the target layout's local shape), or null to allocate it
     * @return the result if this device is in the target mesh (then {@code into} when given), else null
     */
    static Tensor run(KernelContext ctx, CrossMeshTransfer transfer, Tensor local, Tensor into) {
        long device = ctx.deviceId();
        List<CrossMeshTransfer.Piece> outgoing = transfer.piecesFrom(device).stream().filter(p -> p.targetDevice() != device).toList();
        List<CrossMeshTransfer.Piece> incoming = transfer.piecesTo(device);
        boolean inTarget = transfer.target().sharding().mesh().contains(device);
        Tensor result = into;
        try (TensorStore store = ctx.store("transfer", transfer.participants())) {
            for (CrossMeshTransfer.Piece piece : outgoing) {
                try (Tensor view = ShardLayout.narrow(local, piece.sourceOffsets(), piece.shape())) {
                    store.srcSet(piece.key(), view, ctx.stream(), 1);
                }
            }
            for (CrossMeshTransfer.Piece piece : incoming) {
                boolean fromSelf = piece.sourceDevice() == device;
                Tensor source = fromSelf ? local : store.destGet(piece.key(), ctx.stream());
                try {
                    if (result == null) {
                        result = source.new_empty(transfer.target().localShape(device));
                    }
                    try (Tensor from = fromSelf ? ShardLayout.narrow(source, piece.sourceOffsets(), piece.shape()) : new Tensor(source);
                         Tensor to = ShardLayout.narrow(result, piece.targetOffsets(), piece.shape())) {
                        to.copy_(from);
                    }
                } finally {
                    if (!fromSelf) {
                        store.destFinishGet(piece.key(), ctx.stream());
                        source.close();
                    }
                }
            }
            for (CrossMeshTransfer.Piece piece : outgoing) {
                store.srcWaitUntilGetFinished(piece.key(), ctx.stream());
            }
        } catch (RuntimeException e) {
            if (result != null && result != into) {
                result.close();
            }
            throw e;
        }
        return inTarget ? result : null;
    }
}
