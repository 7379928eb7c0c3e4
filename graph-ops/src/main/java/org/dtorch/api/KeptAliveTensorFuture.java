package org.dtorch.api;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.DirectCompletion;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.tensor.NativeMemoryBudget;

/**
 * A {@link TensorFuture} that keeps the tensor it reads alive until the value arrives, so that the client
 * dropping its handle cannot release the operand under the pending read (docs/graph-runtime.md, Memory).
 *
 * <p>The inner future keeps its own reference to the value until it is collected, whatever its readers
 * close; the value's bytes are charged to the {@link NativeMemoryBudget} until this future is collected.
 *
 * <p>Thread-safe: as the inner future.
 */
final class KeptAliveTensorFuture implements TensorFuture, DirectCompletion {
    private final TensorFuture inner;
    @SuppressWarnings({"unused", "FieldCanBeLocal"})
    private volatile DTensor keepAlive;

    KeptAliveTensorFuture(TensorFuture inner, DTensor source) {
        this.inner = inner;
        this.keepAlive = source;
        NativeMemoryBudget.of(source.meta().sharding().mesh().kind())
            .register(this, source.meta().numel() * DTensor.elementSize(source.dtype()), () -> { });
        directCompletion().whenComplete((value, error) -> keepAlive = null);
    }

    @Override
    public CompletableFuture<?> directCompletion() {
        return inner instanceof DirectCompletion direct ? direct.directCompletion() : inner.toCompletableFuture();
    }

    @Override
    public Duration timeout() {
        return inner.timeout();
    }

    @Override
    public Tensor get() {
        return inner.get();
    }

    @Override
    public Optional<Tensor> waitFor(Duration timeout) {
        return inner.waitFor(timeout);
    }

    @Override
    public boolean isReady() {
        return inner.isReady();
    }

    @Override
    public CompletableFuture<Tensor> toCompletableFuture() {
        return inner.toCompletableFuture();
    }
}
