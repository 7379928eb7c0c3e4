package org.dtorch.core.communication.promise;

/**
 * The writing end of a one-shot "done" signal without data, used to synchronize with devices (DTorch's
 * {@code VoidPromise}, for {@code Graph::SyncFuture()}).
 *
 * <p>Thread-safe: any thread may complete the promise; completion is atomic.
 */
public interface VoidPromise extends Promise {

    /** Signals success. */
    void setValue();

    /** The reading end; the second call throws {@link IllegalStateException}. */
    VoidFuture getFuture();
}
