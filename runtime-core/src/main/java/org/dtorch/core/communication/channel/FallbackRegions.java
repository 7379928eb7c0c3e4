package org.dtorch.core.communication.channel;

import org.agrona.concurrent.UnsafeBuffer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Leaves beyond a channel's persistent profiles: each goes through a shared-memory region of its own
 * ({@code <control>-f<sequence>-<leaf>}) that the last consumer rank to copy or discard it removes, so the producer
 * never waits for them and resident memory stays bounded by what is in flight:
 *
 * <pre>
 *  offset   size    field
 *  0        4       consumer ranks that have not copied or discarded it yet
 *  64       bytes   the tensor, row-major
 * </pre>
 *
 * <p>Thread-safe: stateless; the count is decremented atomically.
 */
final class FallbackRegions {
    static final long DATA_OFFSET = 64;
    private static final int REMAINING_OFFSET = 0;

    private FallbackRegions() {
    }

    /** Producer: stages {@code source} in a new region for {@code consumers} ranks and unmaps it here. */
    static void stage(String name, Tensor source, long[] shape, int consumers) {
        long bytes = ShmTensors.byteSize(shape, TorchTensors.dtype(source));
        try (SharedRegion region = SharedRegion.create(name, DATA_OFFSET + bytes)
            .orElseThrow(() -> new IllegalStateException("a channel fallback region exists already: " + name))) {
            ShmTensors.copyInto(source, region.segment().asSlice(DATA_OFFSET, bytes));
            new UnsafeBuffer(region.address(), (int) DATA_OFFSET).putIntRelease(REMAINING_OFFSET, consumers);
        }
    }

    /**
     * Consumer: rank {@code rank}'s part of the leaf (or nothing, to discard: {@code copy} false), then its count
     * taken down; the last rank removes the region.
     *
     * @return the copy, or null when discarding
     */
    static Tensor take(WorkerTensorRef.Leaf leaf, int rank, int world, boolean copy) {
        try (SharedRegion region = SharedRegion.open(leaf.region())
            .orElseThrow(() -> new IllegalStateException("the channel fallback region " + leaf.region() + " is gone"))) {
            Tensor out = copy ? ShmChannelSlots.copyOut(region, leaf, rank, world) : null;
            if (new UnsafeBuffer(region.address(), (int) DATA_OFFSET).getAndAddInt(REMAINING_OFFSET, -1) == 1) {
                region.unlink();
            }
            return out;
        }
    }
}
