package org.dtorch.core.communication.channel;

import java.util.Collection;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.BalancedSplit;

/**
 * The storage of one profile's {@value ChannelLayout#SLOTS} slots, the seam between the channel's protocol (profiles,
 * generations, ACKs, ref order: {@link ChannelProducer}, {@link ChannelConsumer}) and where the bytes live. CPU
 * tensors use {@link ShmChannelSlots}. {@link CudaChannelSlots} implements the same calls over one device allocation
 * with an IPC handle made once, stream-ordered: {@code stage} first makes the producer's stream wait on the completion
 * events of the ranks that copied the slot's previous generation, copies, and records the slot's reusable ready event;
 * {@code copyOut} waits on that event only if it is not complete, copies on the consumer's stream and records the
 * consumer's completion event before the caller publishes its ACK, without waiting for the copy.
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

    /**
     * Producer, once every consumer rank acknowledged the slot's previous generation: copies {@code source} into
     * {@code slot} (ordered after the copying ranks' copies out); the consumers may copy it out once the ref is published.
     */
    void stage(int slot, Tensor source);

    /**
     * Consumer: a fresh tensor with consumer {@code rank}'s part of {@code leaf} (all of it unless the leaf has a
     * shard dimension). On CPU the slot's bytes are no longer needed once this returns; on CUDA the copy may still be
     * running on this thread's current stream, and the slot stays safe because the producer's stream waits on the
     * completion event this records before it overwrites the slot.
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

    /** Closes every one of {@code slots}, even after a failure; rethrows the first failure, the others suppressed. */
    static void closeAll(Collection<? extends ChannelSlots> slots) {
        RuntimeException first = null;
        for (ChannelSlots s : slots) {
            try {
                s.close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /**
     * Finishes this side's device work on the storage (none on CPU), then releases this side's mapping; CPU storage
     * itself lives until the channel closes. Idempotent.
     */
    @Override
    void close();
}
