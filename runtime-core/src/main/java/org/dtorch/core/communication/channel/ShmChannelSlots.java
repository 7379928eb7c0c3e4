package org.dtorch.core.communication.channel;

import org.agrona.BitUtil;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A CPU profile's two slots in one persistent shared-memory region ({@code <control>-p<profile>}), made by the
 * producer once and mapped by each consumer once; the channel's close removes it:
 *
 * <pre>
 *  offset        size     field
 *  0             bytes    slot 0
 *  stride        bytes    slot 1          (stride = bytes rounded up to 64)
 * </pre>
 *
 * <p>Where libtorch has at least {@value #PARALLEL_COPY_MIN_THREADS} intra-op threads, copies of at least
 * {@value #PARALLEL_COPY_BYTES} bytes go through libtorch's {@code copy_} between the tensor and a view of the slot, which
 * cuts a large copy over those threads; smaller ones, and every copy on a machine with fewer threads (where the
 * producer's and the consumer's copies would contend for the same cores), stay one plain memcpy.
 *
 * <p>Not thread-safe: one producer thread or one consumer thread per instance.
 */
final class ShmChannelSlots implements ChannelSlots {
    /** From this many bytes a copy in or out is libtorch's parallel {@code copy_}; below, one memcpy. */
    static final long PARALLEL_COPY_BYTES = 1L << 20;
    /** Below this many intra-op threads every copy is one memcpy. */
    static final int PARALLEL_COPY_MIN_THREADS = 4;

    private final SharedRegion region;
    private final long stride;

    private ShmChannelSlots(SharedRegion region, long stride) {
        this.region = region;
        this.stride = stride;
    }

    /** Producer: a new region for two slots of {@code bytes} each. */
    static ShmChannelSlots create(String name, long bytes) {
        long stride = Math.max(64, BitUtil.align(bytes, 64));
        SharedRegion region = SharedRegion.create(name, ChannelLayout.SLOTS * stride)
            .orElseThrow(() -> new IllegalStateException("a channel profile region exists already: " + name
                + " (a producer of this channel ran before and did not close)"));
        return new ShmChannelSlots(region, stride);
    }

    /** Consumer: maps the region the producer made. */
    static ShmChannelSlots open(String name) {
        SharedRegion region = SharedRegion.open(name)
            .orElseThrow(() -> new IllegalStateException("the channel profile region " + name + " is gone (the producer closed?)"));
        return new ShmChannelSlots(region, region.size() / ChannelLayout.SLOTS);
    }

    @Override
    public String name() {
        return region.name();
    }

    @Override
    public long slotOffset(int slot) {
        return slot * stride;
    }

    @Override
    public byte[] handles(int slot) {
        return new byte[0];
    }

    @Override
    public void stage(int slot, Tensor source) {
        long clock = ChannelPhases.start();
        stageCopy(slot, source);
        ChannelPhases.end(ChannelPhases.Phase.STAGE_COPY, clock);
    }

    private void stageCopy(int slot, Tensor source) {
        long[] shape = TorchTensors.shape(source);
        ScalarType dtype = TorchTensors.dtype(source);
        if (!parallel(ShmTensors.byteSize(shape, dtype))) {
            ShmTensors.copyInto(source, shape, dtype, region.segment().asSlice(slotOffset(slot), stride));
            return;
        }
        try (Tensor target = ShmTensors.view(region, slotOffset(slot), shape, dtype)) {
            target.copy_(source);
        }
    }

    @Override
    public Tensor copyOut(WorkerTensorRef.Leaf leaf, int rank, int world) {
        long clock = ChannelPhases.start();
        Tensor out = copyOut(region, leaf, rank, world);
        ChannelPhases.end(ChannelPhases.Phase.COPY_OUT, clock);
        return out;
    }

    /**
     * A fresh CPU tensor with consumer {@code rank}'s part of the leaf at {@code leaf.offset()} of {@code region}: all
     * of it, or its {@link BalancedSplit} share of the shard dimension, copied by libtorch from a view of the bytes (a
     * whole leaf by one memcpy unless the copy is {@linkplain #parallel parallel}).
     */
    static Tensor copyOut(SharedRegion region, WorkerTensorRef.Leaf leaf, int rank, int world) {
        ScalarType dtype = TorchTensors.ofCode(leaf.dtype());
        if (leaf.shardDim() < 0 && !parallel(ShmTensors.byteSize(leaf.shape(), dtype))) {
            return ShmTensors.copyOut(region.segment().asSlice(leaf.offset()), leaf.shape(), dtype);
        }
        try (Tensor whole = ShmTensors.view(region, leaf.offset(), leaf.shape(), dtype);
             Tensor part = ChannelSlots.rankShare(whole, leaf, rank, world)) {
            Tensor out = ShmTensors.empty(TorchTensors.shape(part), dtype);
            out.copy_(part);
            return out;
        }
    }

    /**
     * True if a copy of {@code bytes} goes through libtorch's parallel {@code copy_}; the pool's size is read per copy,
     * since a worker sets it after start-up ({@code WorkerMain}).
     */
    private static boolean parallel(long bytes) {
        return bytes >= PARALLEL_COPY_BYTES && torch.get_num_threads() >= PARALLEL_COPY_MIN_THREADS;
    }

    @Override
    public void close() {
        region.close();
    }
}
