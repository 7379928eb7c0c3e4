package org.dtorch.core.runtime;

import java.time.Duration;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;

/**
 * The controller's handle on one device, made by the runtime's {@link DeviceFleet}: a worker thread of this
 * process ({@link PerDeviceThreadNodeRunner}) or the handle on a worker process ({@code process.WorkerProcess});
 * the controller never asks which. The controller submits operators and releases in program order, one thread at a
 * time (the client's thread or a controller thread, {@link DeviceFleet#submitMayBlock()}); the node tells the
 * {@link org.dtorch.core.graph.LogicalGraph} when it has run each.
 *
 * <p>Thread-safe: the controller submits, one thread at a time; {@link #cancel} and {@link #liveBlobs} from any
 * thread.
 */
public interface DeviceNode {

    /** Starts running submitted work. */
    void start();

    /** Queues {@code op} to run on this device. */
    void submit(Operator op);

    /** Queues the release of this device's tensor of {@code operand}. */
    void submitRelease(Operand operand);

    /** Makes queued submissions visible to the device (a batch of control messages); a no-op for threads. */
    default void flush() {
    }

    /** Fails every operator not yet run instead of running it, and interrupts a wait in progress. */
    void cancel(Throwable cause);

    /** Stops once everything queued before has been handled. */
    void stop();

    /** Waits for the node to stop; true if it did. */
    boolean join(Duration timeout) throws InterruptedException;

    /** The tensors the device holds; for leak checks. */
    int liveBlobs();
}
