package org.dtorch.api;

import java.util.concurrent.atomic.AtomicLong;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * A declared pipeline edge ({@link DTorch#channel}): while it is open, every {@code redistribute} from its source mesh
 * onto its destination mesh goes through its {@link WorkerTensorChannel} (TeleFuser's direct worker-to-worker path,
 * the source never waiting for the destination beyond two unread transfers of one shape) instead of the ordinary
 * cross-mesh path. The channel's control region belongs to this handle, in the client's process.
 *
 * <p>{@link #close()} drains and tears down in TeleFuser's order, consumers before the producer, so that no consumer
 * finds its producer gone while a transfer is still due: the destination devices detach their consumers (after every
 * transfer queued before), then the source's first device its producer, then the channel and its shared memory go.
 * The runtime's close closes the edges still open.
 *
 * <p>Thread-safe as its runtime: the client thread declares, uses and closes it; {@link #transfers()} may be read from
 * any thread.
 */
public final class ChannelEdge implements AutoCloseable {
    private final DTorch runtime;
    private final DeviceMesh source;
    private final DeviceMesh target;
    private final WorkerTensorChannel channel;
    private final AtomicLong transfers = new AtomicLong();

    ChannelEdge(DTorch runtime, DeviceMesh source, DeviceMesh target, WorkerTensorChannel channel) {
        this.runtime = runtime;
        this.source = source;
        this.target = target;
        this.channel = channel;
    }

    /** The producing mesh. */
    public DeviceMesh source() {
        return source;
    }

    /** The consuming mesh. */
    public DeviceMesh target() {
        return target;
    }

    /** The channel's options: its name, consumer count and timeout. */
    public ChannelOptions options() {
        return channel.options();
    }

    /** How many redistributions were routed through the channel so far. */
    public long transfers() {
        return transfers.get();
    }

    void countTransfer() {
        transfers.incrementAndGet();
    }

    /** The channel itself, closed by the runtime once both sides detached. */
    WorkerTensorChannel channel() {
        return channel;
    }

    /**
     * Detaches both sides (consumers, then producer, each once every device ran what was queued before) and closes the
     * channel, removing its shared memory; later moves between the meshes take the ordinary path. Idempotent.
     *
     * @throws org.dtorch.core.communication.CommException if a device failed while draining; the channel is closed anyway
     */
    @Override
    public void close() {
        runtime.closeChannel(this);
    }

    @Override
    public String toString() {
        return "ChannelEdge{" + source + " -> " + target + ", " + channel.options().name() + "}";
    }
}
