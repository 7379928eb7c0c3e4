package org.dtorch.core.communication.promise;

import org.bytedeco.pytorch.Tensor;

/**
 * The writing end of a one-shot tensor hand-off (docs/communication-core.md, Promises and futures).
 *
 * <p>Exactly one of {@link #setValue} and {@link #setException} succeeds; a second call fails with
 * {@link IllegalStateException}. {@link #getFuture()} works once.
 *
 * <p>Thread-safe: any thread may complete the promise; completion is atomic.
 */
public interface TensorPromise extends Promise {

    /**
     * Completes the promise with a value. The promise keeps its own reference; the caller keeps its own.
     *
     * <p>A CUDA value of a File promise crosses processes through CUDA IPC without a copy: it must have been
     * written on the calling thread's current stream of its device (the future's side waits for that work), and
     * must not be modified until the future's side let it go; the promise keeps the memory until then.
     */
    void setValue(Tensor t);

    /** The reading end; the second call throws {@link IllegalStateException}. */
    TensorFuture getFuture();
}
