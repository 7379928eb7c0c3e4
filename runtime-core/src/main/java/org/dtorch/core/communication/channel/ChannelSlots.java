package org.dtorch.core.communication.channel;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.BalancedSplit;

/**
 * The storage of one profile's {@value ChannelLayout#SLOTS} slots, the seam between the channel's protocol (profiles,
 * generations, ACKs, ref order: {@link ChannelProducer}, {@link ChannelConsumer}) and where the bytes live. CPU
 * tensors use {@link ShmChannelSlots}. A CUDA pool implements the same two calls over one device allocation with an
 * IPC handle made once: {@code stage} copies on the producer's stream and records the slot's reusable ready event,
 * {@code copyOut} waits on that event only if it is not complete, copies on the consumer's stream and records the
 * consumer's completion event before the caller publishes its ACK.
 *
 * <p>Not thread-safe: one producer thread stages, one thread per consumer rank copies out, each through its own
 * instance.
 */
interface ChannelSlots extends AutoCloseable {
    /** The name of the storage, as a ref carries it ({@link WorkerTensorRef.Leaf#region()}). */
    String name();

    /** The first byte of {@code slot}. */
    long slotOffset(int slot);

    /** What a consumer needs besides {@link #name()} to reach {@code slot} ({@link WorkerTensorRef.Leaf#handles()}). */
    byte[] handles(int slot);

    /** Producer: copies {@code source} into {@code slot}; the consumers may copy it out once the ref is published. */
    void stage(int slot, Tensor source);

    /**
     * Consumer: a fresh tensor with consumer {@code rank}'s part of {@code leaf} (all of it unless the leaf has a
     * shard dimension), the slot's bytes no longer needed once this returns.
     */
    Tensor copyOut(WorkerTensorRef.Leaf leaf, int rank, int world);

    /**
     * The part of {@code whole} (a leaf's whole tensor, staged) that consumer {@code rank} of {@code world} takes: its
     * {@link BalancedSplit} share of the shard dimension, or all of it; a new tensor handle either way.
     */
    static Tensor rankShare(Tensor whole, WorkerTensorRef.Leaf leaf, int rank, int world) {
        if (leaf.shardDim() < 0) {
            return new Tensor(whole);
        }
        long size = leaf.shape()[leaf.shardDim()];
        return whole.narrow(leaf.shardDim(), BalancedSplit.offset(size, world, rank), BalancedSplit.size(size, world, rank));
    }

    /** Releases this side's mapping; the storage itself lives until the channel closes. Idempotent. */
    @Override
    void close();
}
