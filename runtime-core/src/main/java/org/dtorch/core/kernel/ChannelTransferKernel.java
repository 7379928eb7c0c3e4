package org.dtorch.core.kernel;

import java.util.Collections;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.channel.ChannelConsumer;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.ChannelProducer;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Moves a distributed tensor from one mesh to a disjoint one through a runtime channel (a declared pipeline edge,
 * TeleFuser's WorkerTensorChannel) instead of a {@link TransferExecutor} meeting of both meshes. The source mesh brings
 * the value to {@code R} (its plan's steps), and its first device publishes the whole tensor once and enqueues the
 * ref; each destination device receives the next ref in the producer's order, copies its part out (its
 * {@code BalancedSplit} share when the target is {@code S(d)} on a 1-D mesh, else the whole), and runs the target
 * mesh's steps from there. The source never waits for the destination, except when both slots of a profile are
 * still unread.
 *
 * <p>Every operator on the channel must publish exactly one ref, so that each consumer's k-th receive is the k-th
 * transfer: if the first source device fails before publishing, it detaches its producer, and the consumers waiting
 * for that ref fail at once naming the detached producer (the edge is unusable after that).
 *
 * <p>Thread-safe: immutable; each device calls {@link #run} on its own worker thread.
 */
public final class ChannelTransferKernel {
    private final ChannelOptions channel;
    private final Sharding source;
    private final Sharding target;
    /** Source to {@code R} on the source mesh; null if the source is replicated already. */
    private final ConvertKernel toReplicate;
    /** The dimension each consumer gets its share of, or -1 for the whole tensor. */
    private final int shardDim;
    /** What arrived (the share or the whole) to the target; null if it is the target. */
    private final ConvertKernel fromArrival;

    private ChannelTransferKernel(ChannelOptions channel, Sharding source, Sharding target, long[] globalShape) {
        this.channel = Objects.requireNonNull(channel, "channel");
        this.source = source;
        this.target = target;
        ConvertKernel gather = ConvertKernel.of(source, replicated(source.mesh()), globalShape);
        this.toReplicate = gather.plan().isIdentity() ? null : gather;
        this.shardDim = target.mesh().ndim() == 1 && target.placement(0) instanceof Shard s ? s.dim() : -1;
        Sharding arrival = shardDim >= 0 ? target : replicated(target.mesh());
        ConvertKernel finish = ConvertKernel.of(arrival, target, globalShape);
        this.fromArrival = finish.plan().isIdentity() ? null : finish;
    }

    /**
     * A kernel for the move from {@code source} to {@code target} through {@code channel}, planned (cached) before any
     * communication.
     *
     * @throws IllegalArgumentException if the meshes share a device, are of different kinds, or the target mesh's size
     *                                  is not the channel's consumer count
     */
    public static ChannelTransferKernel of(Sharding source, Sharding target, long[] globalShape, ChannelOptions channel) {
        checkMeshes(source.mesh(), target.mesh(), channel);
        return new ChannelTransferKernel(channel, source, target, globalShape);
    }

    /** Refuses meshes a channel cannot join: shared devices, different kinds, or a consumer count that differs. */
    public static void checkMeshes(DeviceMesh source, DeviceMesh target, ChannelOptions channel) {
        String what = "channel '" + channel.name() + "' from " + source + " to " + target;
        if (source.kind() != target.kind()) {
            throw new IllegalArgumentException(what + ": the meshes must be of one device kind");
        }
        for (long id : source.deviceIds()) {
            if (target.contains(id)) {
                throw new IllegalArgumentException(what + ": the meshes must be disjoint, but both hold device " + id);
            }
        }
        if (target.count() != channel.consumerWorldSize()) {
            throw new IllegalArgumentException(what + ": the channel has " + channel.consumerWorldSize() + " consumer ranks, the mesh "
                + target.count() + " devices");
        }
    }

    private static Sharding replicated(DeviceMesh mesh) {
        return new Sharding(mesh, Collections.nCopies(mesh.ndim(), Placement.replicate()));
    }

    /** The channel this kernel moves through. */
    public ChannelOptions channel() {
        return channel;
    }

    /**
     * Runs this device's part.
     *
     * @param input this device's local tensor under the source sharding on a source device, null on a destination one
     * @return null on a source device; on a destination device a new local tensor under the target sharding
     * @throws org.dtorch.core.communication.CommException with the channel's message if the channel failed, timed out
     *                                                     or lost a peer
     */
    public Tensor run(KernelContext ctx, Tensor input) {
        long device = ctx.deviceId();
        if (source.mesh().contains(device)) {
            Objects.requireNonNull(input, () -> channel.name() + ": source device " + device + " got no input");
            publish(ctx, input, device == source.mesh().deviceIds().getFirst());
            return null;
        }
        int rank = target.mesh().deviceIds().indexOf(device);
        if (rank < 0) {
            throw new IllegalArgumentException(channel.name() + ": device " + device + " is in neither " + source.mesh() + " nor "
                + target.mesh());
        }
        ChannelConsumer consumer = ChannelEnds.consumer(channel, rank);
        Tensor arrived = onWorkerDevice(ctx, (Tensor) consumer.resolve(consumer.receive()));
        if (fromArrival == null) {
            return arrived;
        }
        try (arrived) {
            return fromArrival.run(ctx, arrived);
        }
    }

    private void publish(KernelContext ctx, Tensor input, boolean first) {
        try {
            Tensor whole = toReplicate == null ? input : toReplicate.run(ctx, input);
            try {
                if (first) {
                    ChannelProducer producer = ChannelEnds.producer(channel);
                    producer.enqueue(shardDim >= 0 ? producer.publish(whole, shardDim) : producer.publish(whole));
                }
            } finally {
                if (whole != input) {
                    whole.close();
                }
            }
        } catch (RuntimeException e) {
            if (first) {
                try {
                    ChannelEnds.closeProducer(channel);
                } catch (RuntimeException detach) {
                    e.addSuppressed(detach);
                }
            }
            throw e;
        }
    }

    /** A CUDA value lands on the producer's GPU index in this process (the channel's rule): moved to this worker's GPU. */
    private static Tensor onWorkerDevice(KernelContext ctx, Tensor arrived) {
        Device gpu = ctx.stream().device();
        if (!arrived.is_cuda() || TorchTensors.device(arrived).equals(gpu)) {
            return arrived;
        }
        try (arrived) {
            return TorchTensors.to(arrived, gpu);
        }
    }
}
