package org.dtorch.api;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.kernel.ChannelTransferKernel;
import org.dtorch.core.runtime.process.NodeSpec;
import org.dtorch.ops.ChannelDetachSpec;

/**
 * The pipeline edges declared on a {@link DTorch} runtime: {@link #declare} makes an edge's channel, the redistributions
 * between exactly its two meshes find it ({@link #channelFor}), and {@link #close(ChannelEdge, Duration)} detaches its
 * consumers, then its producer, then closes the channel. The runtime's close closes the edges still open.
 *
 * <p>Thread-safe: the map of open edges is guarded by this object, so the runtime may close from another thread than the
 * client's; declaring and routing are the client thread's.
 */
final class Channels {
    private static final System.Logger LOG = System.getLogger(Channels.class.getName());
    private final DTorch runtime;
    /** The declared edges by (source, destination) mesh, in declaration order. */
    private final Map<List<DeviceMesh>, ChannelEdge> open = new LinkedHashMap<>();
    private int declared;

    Channels(DTorch runtime) {
        this.runtime = runtime;
    }

    /** {@link DTorch#channel(DeviceMesh, DeviceMesh, Duration)}. */
    synchronized ChannelEdge declare(DeviceMesh source, DeviceMesh target, Duration timeout) {
        runtime.checkKind("channel", Objects.requireNonNull(source, "channel: source mesh is null"));
        runtime.checkKind("channel", Objects.requireNonNull(target, "channel: target mesh is null"));
        CommOptions.validateTimeout(timeout);
        checkOnControllerNode(source, target);
        List<DeviceMesh> key = List.of(source, target);
        if (open.containsKey(key)) {
            throw new IllegalStateException("channel: the edge " + source + " -> " + target + " is declared already ("
                + open.get(key).options().name() + "); close it first");
        }
        ChannelOptions options = ChannelOptions.of(runtime.runtime().instanceId(), "edge" + (declared + 1) + " " + source.deviceIds() + "->"
            + target.deviceIds(), target.count()).withTimeout(timeout);
        ChannelTransferKernel.checkMeshes(source, target, options);
        ChannelEdge edge = new ChannelEdge(runtime, source, target, WorkerTensorChannel.create(options));
        declared++;
        open.put(key, edge);
        return edge;
    }

    /**
     * A channel's control region and shared memory are made in the controller's process, and its ends map that memory:
     * across nodes, both meshes must be on node 0, the controller's host.
     */
    private void checkOnControllerNode(DeviceMesh source, DeviceMesh target) {
        NodeSpec nodes = runtime.runtime().options().nodes();
        if (nodes == null) {
            return;
        }
        for (DeviceMesh mesh : List.of(source, target)) {
            for (long id : mesh.deviceIds()) {
                if (nodes.nodeOf(id) != 0) {
                    throw new IllegalArgumentException("channel: device " + id + " of " + mesh + " is on node " + nodes.nodeOf(id)
                        + "; a WorkerTensorChannel moves tensors through the shared memory of one host, so in a run across nodes both "
                        + "meshes must be on node 0 (devices " + nodes.devicesOf(0) + "); redistribute between meshes on other nodes "
                        + "without a channel");
                }
            }
        }
    }

    /** The open edge from {@code source} to {@code target}, or null if none. */
    synchronized ChannelEdge channelFor(DeviceMesh source, DeviceMesh target) {
        return open.get(List.of(source, target));
    }

    /**
     * Closes the edges still open, each side's detach given {@code drainLimit}; a failure is logged, so that the runtime
     * closes anyway.
     */
    void closeAll(Duration drainLimit) {
        List<ChannelEdge> edges;
        synchronized (this) {
            edges = List.copyOf(open.values());
        }
        for (ChannelEdge edge : edges) {
            try {
                close(edge, drainLimit);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "closing " + edge + " while the runtime closes: " + e);
            }
        }
    }

    /**
     * Closes {@code edge}, waiting at most {@code drainLimit} for each side's detach to run everywhere; past it the channel
     * closes anyway, which wakes any device waiting in it, and the timeout is thrown. An edge closed already is left alone.
     */
    void close(ChannelEdge edge, Duration drainLimit) {
        synchronized (this) {
            if (open.get(List.of(edge.source(), edge.target())) != edge) {
                return;
            }
            open.remove(List.of(edge.source(), edge.target()));
        }
        ChannelOptions options = edge.options();
        try {
            runtime.graph().add(new ChannelDetachSpec(options, false, edge.target().deviceIds()), List.of());
            drain(edge, "the consumers' detach", drainLimit);
            runtime.graph().add(new ChannelDetachSpec(options, true, List.of(edge.source().deviceIds().getFirst())), List.of());
            drain(edge, "the producer's detach", drainLimit);
        } finally {
            edge.channel().close();
        }
    }

    private void drain(ChannelEdge edge, String what, Duration limit) {
        if (!runtime.runtime().syncFuture().waitFor(limit)) {
            throw new CommTimeoutException("closing " + edge + ": " + what + " did not run on every device within " + Deadline.format(limit)
                + "; the channel was closed anyway");
        }
    }
}
