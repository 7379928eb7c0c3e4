package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * The future of a {@link FileVoidPromise}, in the process that created the promise.
 *
 * <p>Thread-safe: any thread may wait, query or register callbacks.
 */
final class FileVoidFuture extends FileFuture implements VoidFuture, DirectCompletion {

    FileVoidFuture(FilePromiseRegion region, Duration getTimeout) {
        super(region, false, "VoidFuture", getTimeout);
    }

    @Override
    public void get() {
        awaitOrThrow();
        valueOrThrow();
    }

    @Override
    public boolean waitFor(Duration timeout) {
        if (!await(timeout)) {
            return false;
        }
        valueOrThrow();
        return true;
    }

    @Override
    public CompletableFuture<Void> toCompletableFuture() {
        return completion();
    }
}
