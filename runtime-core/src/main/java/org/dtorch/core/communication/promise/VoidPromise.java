package org.dtorch.core.communication.promise;

/**
 * The writing end of a one-shot "done" signal without data, used to synchronize with devices (the
 * seed's {@code VoidPromise}, for {@code Graph::SyncFuture()}).
 *
 * <p>Thread-safe: any thread may complete the promise; completion is atomic.
 */
public interface VoidPromise {

    /** Signals success. */
    void setValue();

    /** Signals an error; {@code get()} on the future rethrows it as the cause. */
    void setException(Throwable e);

    /** The reading end; the second call throws {@link IllegalStateException}. */
    VoidFuture getFuture();

    /**
     * A string from which {@link TensorPromises#voidFromSerialized} rebuilds this promise in another
     * process.
     *
     * @throws UnsupportedOperationException for a {@link TensorPromiseType#MEMORY} promise
     */
    String serialize();

    /** The backend of this promise. */
    TensorPromiseType type();
}
