package org.dtorch.polyglot;

import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;

/**
 * The values {@link PyBridge} hands to Python: futures of whole tensors ({@link PyTensorFuture}, which Python awaits or
 * gives callbacks), the threads that run those callbacks ({@link PythonCallbacks}, never a device's worker), and the
 * wait for every device to run what was queued.
 *
 * <p>Thread-safe: futures are made on the Python client thread and may be read from any thread; the host stops the
 * callback threads once its context is closed.
 */
final class BridgeValues {
    private final DTorch runtime;
    /** The threads that run Python callbacks of these futures; stopped by the host that closes. */
    private final PythonCallbacks callbacks = new PythonCallbacks();

    BridgeValues(DTorch runtime) {
        this.runtime = runtime;
    }

    /** {@link PyBridge#getTensorAsync}. */
    PyTensorFuture getTensorAsync(DTensor t) {
        return new PyTensorFuture(runtime.getTensorAsync(t), callbacks);
    }

    /** Blocks until every device ran everything queued so far. */
    void sync() {
        runtime.sync();
    }

    /** Stops the threads that run Python callbacks. */
    void stopCallbacks() {
        callbacks.close();
    }
}
