package org.dtorch.core.kernel;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The S(d) to R step of a plan: every rank's shard of dim {@code d}, in rank order. The shares are the balanced
 * split of a size the plan knows, so no rank needs to learn another's shape (which {@code allGatherCat}'s first round
 * would exchange).
 *
 * <ul>
 *   <li>Equal shares on dim 0, or on any dim between distinct devices: {@link ThreadGroup#allGatherStacked}, one
 *   gather into one {@code [world, ...]} allocation, then a view (dim 0) or one reshaping copy (other dims).</li>
 *   <li>Uneven shares, or equal shares on a dim other than 0 among ranks sharing a device: the group's uneven
 *   {@link ThreadGroup#allGather} with the sizes from the split (what {@code allGatherCat} does after its round of
 *   shapes), which on one device is a single {@code cat} of the peers' shards.</li>
 * </ul>
 *
 * <p>Thread-safe: stateless; each rank calls it on its own thread, all ranks of the group together.
 */
final class RankOrderGather {

    private RankOrderGather() {
    }

    /**
     * Gathers {@code local}, this rank's balanced share of {@code gatheredSize} on {@code dim}; returns a new
     * contiguous tensor with {@code gatheredSize} on {@code dim}. A local size other than the rank's share fails
     * before communicating, in {@link ThreadGroup#allGather}'s check.
     */
    static Tensor gather(ThreadGroup group, Tensor local, int dim, long gatheredSize) {
        int world = group.getWorldSize();
        boolean equal = gatheredSize % world == 0 && local.size(dim) == gatheredSize / world;
        if (!equal || dim != 0 && group.isSameDevice()) {
            return group.allGather(local, dim, gatheredSize);
        }
        long[] shape = TorchTensors.shape(local);
        shape[dim] = gatheredSize;
        try (Tensor stacked = group.allGatherStacked(local)) {
            if (dim == 0) {
                return stacked.view(shape);
            }
            try (Tensor moved = stacked.movedim(0, dim)) {
                return moved.reshape(shape);
            }
        }
    }
}
