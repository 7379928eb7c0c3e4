package org.dtorch.polyglot;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeoutException;
import org.bytedeco.pytorch.Tensor;
import java.util.concurrent.CompletableFuture;
import org.dtorch.core.communication.promise.DirectCompletion;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.polyglot.torch.PyTensor;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * A {@link TensorFuture} as Python sees it. {@link #get()} and {@link #waitMillis(long)} block in Java, so
 * GraalPy releases the Python GIL and other Python threads keep running. {@link #onDone(Value)} pushes
 * completion to a Python callable, from the completing thread: the Python {@code __await__} hands it to
 * {@code loop.call_soon_threadsafe}, so an awaiting coroutine wakes without polling.
 *
 * <p>Thread-safe: as the underlying future.
 */
public final class PyTensorFuture {
    private final TensorFuture future;
    private final PythonCallbacks callbacks;
    private volatile long completedAtNanos;

    PyTensorFuture(TensorFuture future, PythonCallbacks callbacks) {
        this.future = Objects.requireNonNull(future, "future");
        this.callbacks = Objects.requireNonNull(callbacks, "callbacks");
        // Noted on the completer's thread (a volatile write), so that wake-up measurements start at the value.
        direct().whenComplete((value, error) -> markCompleted());
    }

    /** Records the first moment any completion callback saw the value (callbacks run in no fixed order). */
    private void markCompleted() {
        if (completedAtNanos == 0) {
            completedAtNanos = System.nanoTime();
        }
    }

    /** When the value (or error) arrived, on the JVM's monotonic clock; 0 while pending. For measuring wake-ups. */
    @HostAccess.Export
    public long completedAtNanos() {
        return completedAtNanos;
    }

    /** The deadline of {@link #get()} and of Python's {@code await}, in milliseconds: the runtime's timeout. */
    @HostAccess.Export
    public long timeoutMillis() {
        return future.timeout().toMillis();
    }

    /** Blocks up to the runtime's timeout; the value, or the runtime's error. */
    @HostAccess.Export
    public PyTensor get() {
        return PyTensor.wrapValue(future.get());
    }

    /**
     * Blocks up to {@code timeoutMillis}.
     *
     * @throws TimeoutException if nothing arrived by then (Python raises {@code TimeoutError})
     */
    @HostAccess.Export
    public PyTensor waitMillis(long timeoutMillis) throws TimeoutException {
        if (timeoutMillis <= 0) {
            throw new IllegalArgumentException("wait: timeout_ms must be positive, got " + timeoutMillis);
        }
        Optional<Tensor> value = future.waitFor(Duration.ofMillis(timeoutMillis));
        if (value.isEmpty()) {
            throw new TimeoutException("TensorFuture.wait(" + timeoutMillis + " ms) timed out: the value has not arrived");
        }
        return PyTensor.wrapValue(value.get());
    }

    /** True once a value or an error is present. */
    @HostAccess.Export
    public boolean isReady() {
        return future.isReady();
    }

    /**
     * Calls {@code callback(value, error)} once when the future completes: {@code value} a host tensor and
     * {@code error} null, or {@code value} null and {@code error} the message (naming the failed operator
     * and device). The call happens on one of the threads of this bridge's host ({@code PythonCallbacks}), never
     * on a device's worker, even when the future is complete already, so a callback may block.
     */
    @HostAccess.Export
    public void onDone(Value callback) {
        if (!callback.canExecute()) {
            throw new IllegalArgumentException("onDone needs a callable, got " + callback);
        }
        // The completer (a device's worker, the File-future watcher) only hands the call over to a thread of this
        // bridge's host, which enters Python; see PythonCallbacks.
        direct().whenComplete((value, error) -> callbacks.execute(() -> deliver(callback, value, error)));
    }

    private CompletableFuture<?> direct() {
        return future instanceof DirectCompletion d ? d.directCompletion() : future.toCompletableFuture();
    }

    private void deliver(Value callback, Object value, Throwable error) {
        markCompleted();
        try {
            if (error == null) {
                callback.executeVoid(PyTensor.wrapValue(new Tensor((Tensor) value)), null);
            } else {
                Throwable cause = error instanceof java.util.concurrent.CompletionException && error.getCause() != null ? error.getCause() : error;
                callback.executeVoid(null, cause.getClass().getName() + ": " + cause.getMessage());
            }
        } catch (RuntimeException raised) {
            // As asyncio does with a callback that raises: say so, and carry on.
            System.err.println("dtorch: a done callback raised " + raised.getMessage());
        }
    }
}
