package org.dtorch.core.communication.promise;

import java.util.concurrent.CompletableFuture;

/**
 * A future's completion as its completer sees it, for the runtime's own bookkeeping (joining futures, noting
 * when a value arrived, dropping a kept-alive handle): stages attached here run on the thread that completes
 * the promise, a device's worker or the File-future watcher, so they must be short and never block. User
 * callbacks go through {@code toCompletableFuture()}, which runs them on a callback thread.
 *
 * <p>Thread-safe: the returned future is.
 */
public interface DirectCompletion {

    /** Completed by the promise's completer; never complete it, and attach only short non-blocking stages. */
    CompletableFuture<?> directCompletion();
}
