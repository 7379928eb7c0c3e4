package org.dtorch.core.communication.promise;

import java.util.Objects;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.ShmTensors;

/**
 * The shape and dtype a promise's value will have, when its creator knows them (a runtime's {@code get_tensor} knows
 * them from inference): a File future's getter that has to sleep then allocates the value's tensor first, so that once
 * woken it only copies bytes: a first native call on a thread just back from a sleep costs microseconds. A value that
 * turns out different is read as without it.
 *
 * <p>Immutable. Thread-safe.
 *
 * @param shape the value's sizes (copied)
 * @param dtype the value's dtype
 */
public record ExpectedValue(long[] shape, ScalarType dtype) {

    public ExpectedValue {
        shape = Objects.requireNonNull(shape, "shape").clone();
        dtype = Objects.requireNonNull(dtype, "dtype").intern();
        for (long size : shape) {
            if (size < 0) {
                throw new IllegalArgumentException("ExpectedValue: negative size in " + java.util.Arrays.toString(shape));
            }
        }
    }

    /** The value's sizes (a copy). */
    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The value's size in bytes. */
    long bytes() {
        return ShmTensors.byteSize(shape, dtype);
    }
}
