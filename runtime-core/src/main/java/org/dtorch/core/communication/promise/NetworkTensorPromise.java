package org.dtorch.core.communication.promise;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A {@link TensorPromise} whose future may live on another host: the value travels as the store value of its key
 * (at most {@link NetworkPromiseWire#MAX_VALUE_BYTES}), and the future gets a CPU tensor.
 *
 * <p>Thread-safe: the claim is atomic in the store.
 */
final class NetworkTensorPromise extends NetworkPromise implements TensorPromise {

    NetworkTensorPromise(NetworkPromiseStore store, String key, boolean creator, Duration getTimeout) {
        super(store, key, creator, "TensorPromise", getTimeout);
    }

    /**
     * {@inheritDoc}
     *
     * @throws IllegalArgumentException for an undefined value or one over the store's size limit, before anything is sent
     */
    @Override
    public void setValue(Tensor t) {
        if (t == null || t.isNull() || !t.defined()) {
            throw new IllegalArgumentException("TensorPromise.setValue: value is " + TorchTensors.describe(t));
        }
        if (!tryComplete(NetworkPromiseWire.encodeValue(t, key))) {
            throw alreadyCompleted("setValue");
        }
    }

    @Override
    public TensorFuture getFuture() {
        return NetworkFuture.ofTensor(takeFuture(), key, getTimeout);
    }
}
