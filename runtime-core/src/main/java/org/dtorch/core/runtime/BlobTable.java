package org.dtorch.core.runtime;

import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.memory.ByteGauge;

/**
 * One device's local tensors by operand id: the worker owns every tensor in it and closes it when the
 * client releases the operand (or at shutdown). A failed operand has a failure instead of a tensor. The bytes of the
 * tensors it holds ({@code nbytes}, each tensor counted whole even where two share storage) are in {@link #bytes()}.
 *
 * <p>Not thread-safe: only its worker thread touches it, except {@link #size()}.
 */
final class BlobTable {
    private final LongKeyedMap<Tensor> tensors = new LongKeyedMap<>();
    private final LongKeyedMap<Throwable> failures = new LongKeyedMap<>();
    /** Live tensors: written by the worker thread alone (a release store, no atomic update), read by any. */
    private final AtomicInteger live = new AtomicInteger();
    private final ByteGauge bytes = new ByteGauge();

    void put(long operandId, Tensor tensor) {
        Tensor previous = tensors.put(operandId, tensor);
        if (previous == tensor) {
            return;
        }
        if (previous == null) {
            live.setRelease(live.getPlain() + 1);
        } else {
            bytes.subtract(previous.nbytes());
            previous.close();
        }
        bytes.add(tensor.nbytes());
    }

    Tensor get(long operandId) {
        return tensors.get(operandId);
    }

    void fail(long operandId, Throwable cause) {
        if (failures.get(operandId) == null) {
            failures.put(operandId, cause);
        }
        Tensor dropped = tensors.remove(operandId);
        if (dropped != null) {
            bytes.subtract(dropped.nbytes());
            dropped.close();
            live.setRelease(live.getPlain() - 1);
        }
    }

    Throwable failure(long operandId) {
        return failures.isEmpty() ? null : failures.get(operandId);
    }

    boolean anyFailure() {
        return !failures.isEmpty();
    }

    void release(long operandId) {
        if (!failures.isEmpty()) {
            failures.remove(operandId);
        }
        Tensor tensor = tensors.remove(operandId);
        if (tensor != null) {
            bytes.subtract(tensor.nbytes());
            tensor.close();
            live.setRelease(live.getPlain() - 1);
        }
    }

    /** Live tensors; readable from any thread. */
    int size() {
        return live.get();
    }

    /** Live and peak bytes of the tensors held. */
    ByteGauge bytes() {
        return bytes;
    }

    void clear() {
        tensors.forEachValue(Tensor::close);
        tensors.clear();
        failures.clear();
        live.set(0);
        bytes.clearLive();
    }
}
