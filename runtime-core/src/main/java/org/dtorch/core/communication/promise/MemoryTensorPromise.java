package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A {@link TensorPromise} whose future lives in the same process (docs/communication-core.md, Promises and
 * futures): a {@link CompletableFuture} holding the promise's own reference to the value.
 *
 * <p>A getter that has to park makes the handles of the hand-off first (the promise's own reference and the getter's
 * result, which the completer fills before it completes: {@link PreparedReference}), so completing makes none and the
 * woken getter returns without a native call, which would cost microseconds on a thread just back from a park.
 *
 * <p>Thread-safe: completion and {@link #getFuture()} are atomic.
 */
final class MemoryTensorPromise extends MemoryPromise<Tensor> implements TensorPromise {

    /** The handles a parked getter lent (the promise's own reference and its result); taken by {@link #setValue}. */
    private final AtomicReference<PreparedReference.Lent> spare = new AtomicReference<>();

    MemoryTensorPromise(Duration getTimeout) {
        super("TensorPromise", getTimeout);
    }

    @Override
    public void setValue(Tensor t) {
        if (t == null || t.isNull() || !t.defined()) {
            throw new IllegalArgumentException("TensorPromise.setValue: value is " + TorchTensors.describe(t));
        }
        Tensor own = PreparedReference.takeSpareFor(spare, t);
        if (!completeWith(own)) {
            own.close();
            throw alreadyCompleted("setValue");
        }
    }

    @Override
    public TensorFuture getFuture() {
        takeFuture();
        return new MemoryTensorFuture(completion, spare, getTimeout);
    }

    /** The future of a {@link MemoryTensorPromise}. Thread-safe. */
    static final class MemoryTensorFuture implements TensorFuture, DirectCompletion {
        private final CompletableFuture<Tensor> value;
        private final AtomicReference<PreparedReference.Lent> spare;
        private final Duration getTimeout;

        MemoryTensorFuture(CompletableFuture<Tensor> value, AtomicReference<PreparedReference.Lent> spare, Duration getTimeout) {
            this.value = value;
            this.spare = spare;
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
            try (PreparedReference prepared = new PreparedReference(spare)) {
                CompletionWait.awaitOrThrow(value, timeout(), "TensorFuture.get()",
                    "no value or error was set (the producing operator has not run)", prepared);
                return newReference(prepared);
            }
        }

        @Override
        public Optional<Tensor> waitFor(Duration timeout) {
            CommOptions.validateTimeout(timeout);
            try (PreparedReference prepared = new PreparedReference(spare)) {
                if (!CompletionWait.awaitDone(value, timeout.toNanos(), "TensorFuture.waitFor()", prepared)) {
                    return Optional.empty();
                }
                return Optional.of(newReference(prepared));
            }
        }

        @Override
        public boolean isReady() {
            return value.isDone();
        }

        @Override
        public CompletableFuture<Tensor> toCompletableFuture() {
            return FutureCallbacks.offCompleter(value);
        }

        private Tensor newReference(PreparedReference prepared) {
            try {
                return prepared.referenceTo(value.join());
            } catch (CompletionException e) {
                throw new FutureFailedException("TensorFuture", e.getCause());
            }
        }
    }
}
