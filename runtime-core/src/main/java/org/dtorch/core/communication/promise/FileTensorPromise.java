package org.dtorch.core.communication.promise;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A {@link TensorPromise} whose future may live in another process of this host (docs/process-mode.md, File
 * promises): shared memory with a futex. {@link #serialize()} names the region;
 * {@link TensorPromises#fromSerialized} attaches to it elsewhere.
 *
 * <p>Thread-safe: completion is a compare-and-set in shared memory.
 */
final class FileTensorPromise extends FilePromise implements TensorPromise {

    /** What the future's getter may allocate before it sleeps; null when unknown. */
    private final ExpectedValue expected;

    FileTensorPromise(FilePromiseRegion region, boolean creator, Duration getTimeout, ExpectedValue expected) {
        super(region, creator, "TensorPromise", getTimeout);
        this.expected = expected;
    }

    @Override
    public void setValue(Tensor t) {
        if (t == null || t.isNull() || !t.defined()) {
            throw new IllegalArgumentException("TensorPromise.setValue: value is " + TorchTensors.describe(t));
        }
        if (!region.tryCompleteWithValue(t)) {
            throw alreadyCompleted("setValue");
        }
        completed();
    }

    @Override
    public TensorFuture getFuture() {
        return FileFuture.ofTensor(takeFuture(), getTimeout, expected);
    }
}
