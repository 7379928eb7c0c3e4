package org.dtorch.core.communication.promise;

/**
 * What the writing ends of both hand-offs share ({@link TensorPromise}, {@link VoidPromise}): failing, and naming
 * the backend and the serialized form by which another process rebuilds the promise.
 *
 * <p>Thread-safe: any thread may complete a promise; completion is atomic.
 */
public interface Promise {

    /** Completes the promise with an error; {@code get()} on the future rethrows it as the cause. */
    void setException(Throwable e);

    /**
     * A string from which {@link TensorPromises} rebuilds this promise in another process (File: the shared-memory
     * object's name).
     *
     * @throws UnsupportedOperationException for a {@link TensorPromiseType#MEMORY} promise
     */
    String serialize();

    /** The backend of this promise. */
    TensorPromiseType type();
}
