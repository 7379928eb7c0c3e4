package org.dtorch.core.runtime;

import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Tensor;

/**
 * One device's local tensors by operand id: the worker owns every tensor in it and closes it when the
 * client releases the operand (or at shutdown). A failed operand has a failure instead of a tensor.
 *
 * <p>Not thread-safe: only its worker thread touches it, except {@link #size()}.
 */
final class BlobTable {
    private final LongKeyedMap<Tensor> tensors = new LongKeyedMap<>();
    private final LongKeyedMap<Throwable> failures = new LongKeyedMap<>();
    /** Live tensors: written by the worker thread alone (a release store, no atomic update), read by any. */
    private final AtomicInteger live = new AtomicInteger();

    void put(long operandId, Tensor tensor) {
        Tensor previous = tensors.put(operandId, tensor);
        if (previous == null) {
            live.setRelease(live.getPlain() + 1);
        } else if (previous != tensor) {
            previous.close();
        }
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
            tensor.close();
            live.setRelease(live.getPlain() - 1);
        }
    }

    /** Live tensors; readable from any thread. */
    int size() {
        return live.get();
    }

    void clear() {
        tensors.forEachValue(Tensor::close);
        tensors.clear();
        failures.clear();
        live.set(0);
    }
}
