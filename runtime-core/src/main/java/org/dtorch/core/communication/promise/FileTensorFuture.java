package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.pytorch.Tensor;

/**
 * The future of a {@link FileTensorPromise}, in the process that created the promise. The value is read
 * once: a small one is copied out of shared memory, a large one is viewed in place. Every {@code get}
 * returns a new reference to it.
 *
 * <p>Thread-safe: any thread may wait, query or register callbacks.
 */
final class FileTensorFuture extends FileFuture implements TensorFuture, DirectCompletion {

    FileTensorFuture(FilePromiseRegion region, Duration getTimeout) {
        super(region, true, "TensorFuture", getTimeout);
    }

    @Override
    public Tensor get() {
        awaitOrThrow();
        return new Tensor(valueOrThrow());
    }

    @Override
    public Optional<Tensor> waitFor(Duration timeout) {
        if (!await(timeout)) {
            return Optional.empty();
        }
        return Optional.of(new Tensor(valueOrThrow()));
    }

    @Override
    public CompletableFuture<Tensor> toCompletableFuture() {
        return completion();
    }
}
