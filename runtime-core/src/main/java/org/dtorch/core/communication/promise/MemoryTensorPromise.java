package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A {@link TensorPromise} whose future lives in the same process (docs/communication-core.md, Promises and
 * futures): a {@link CompletableFuture} holding the promise's own reference to the value.
 *
 * <p>Thread-safe: completion and {@link #getFuture()} are atomic.
 */
final class MemoryTensorPromise extends MemoryPromise<Tensor> implements TensorPromise {

    MemoryTensorPromise(Duration getTimeout) {
        super("TensorPromise", getTimeout);
    }

    @Override
    public void setValue(Tensor t) {
        if (t == null || t.isNull() || !t.defined()) {
            throw new IllegalArgumentException("TensorPromise.setValue: value is " + TorchTensors.describe(t));
        }
        Tensor own = new Tensor(t);
        if (!completeWith(own)) {
            own.close();
            throw alreadyCompleted("setValue");
        }
    }

    @Override
    public TensorFuture getFuture() {
        takeFuture();
        return new MemoryTensorFuture(completion, getTimeout);
    }

    /** The future of a {@link MemoryTensorPromise}. Thread-safe. */
    static final class MemoryTensorFuture implements TensorFuture, DirectCompletion {
        private final CompletableFuture<Tensor> value;
        private final Duration getTimeout;

        MemoryTensorFuture(CompletableFuture<Tensor> value, Duration getTimeout) {
            this.value = value;
            this.getTimeout = getTimeout;
        }

        @Override
        public Duration timeout() {
            return CompletionWait.ownOrGlobal(getTimeout);
        }

        @Override
        public CompletableFuture<?> directCompletion() {
            return value;
        }

        @Override
        public Tensor get() {
            CompletionWait.awaitOrThrow(value, timeout(), "TensorFuture.get()",
                "no value or error was set (the producing operator has not run)");
            return newReference();
        }

        @Override
        public Optional<Tensor> waitFor(Duration timeout) {
            CommOptions.validateTimeout(timeout);
            if (!CompletionWait.awaitDone(value, timeout.toNanos(), "TensorFuture.waitFor()")) {
                return Optional.empty();
            }
            return Optional.of(newReference());
        }

        @Override
        public boolean isReady() {
            return value.isDone();
        }

        @Override
        public CompletableFuture<Tensor> toCompletableFuture() {
            return FutureCallbacks.offCompleter(value);
        }

        private Tensor newReference() {
            try {
                return new Tensor(value.join());
            } catch (CompletionException e) {
                throw new FutureFailedException("TensorFuture", e.getCause());
            }
        }
    }
}
