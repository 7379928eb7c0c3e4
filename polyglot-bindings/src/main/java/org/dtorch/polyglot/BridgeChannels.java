package org.dtorch.polyglot;

import java.time.Duration;
import org.dtorch.api.ChannelEdge;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * The pipeline edges {@link PyBridge} declares for Python's {@code dtorch.channel} ({@link DTorch#channel}): Python gives
 * the timeout in seconds, 0 for the runtime's. Python reads the {@link ChannelEdge} handle it gets back through the
 * bridge, and its {@code Channel} closes the edge when its {@code with} block ends.
 *
 * <p>Not thread-safe: the Python client thread that owns the runtime.
 */
final class BridgeChannels {
    private final DTorch runtime;

    BridgeChannels(DTorch runtime) {
        this.runtime = runtime;
    }

    /** The edge from {@code src} to {@code dst}; {@code timeoutSeconds} 0 means the runtime's timeout. */
    ChannelEdge declare(DeviceMesh src, DeviceMesh dst, double timeoutSeconds) {
        return timeoutSeconds == 0 ? runtime.channel(src, dst) : runtime.channel(src, dst, Duration.ofNanos(Math.round(timeoutSeconds * 1e9)));
    }
}
