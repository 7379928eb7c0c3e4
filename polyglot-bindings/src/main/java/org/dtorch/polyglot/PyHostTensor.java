package org.dtorch.polyglot;

import java.util.Objects;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;
import org.graalvm.polyglot.HostAccess;

/**
 * A whole tensor in this process, as Python sees a value that came back from the workers: its shape, dtype,
 * values, and the address of its contiguous bytes, over which the Python side lays a zero-copy
 * {@code memoryview} (through {@code ctypes}) that keeps this object alive.
 *
 * <p>Not thread-safe: one Python thread uses a value at a time; {@link #close()} frees the memory at once
 * (otherwise the garbage collector does).
 */
public final class PyHostTensor implements AutoCloseable {
    private final Tensor tensor;

    /** Takes ownership of {@code tensor}, made contiguous if it is not. */
    PyHostTensor(Tensor tensor) {
        Objects.requireNonNull(tensor, "tensor");
        if (tensor.is_contiguous()) {
            this.tensor = tensor;
        } else {
            this.tensor = tensor.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
            tensor.close();
        }
    }

    /** A new reference to the torch tensor (for Java callers); the caller closes it. */
    public Tensor torch() {
        return new Tensor(tensor);
    }

    /** The shape. */
    @HostAccess.Export
    public long[] shape() {
        return TorchTensors.shape(tensor);
    }

    /** The PyTorch name of the dtype: {@code float32}, {@code int64}, ... */
    @HostAccess.Export
    public String dtype() {
        return TorchTensors.dtypeName(TorchTensors.dtype(tensor));
    }

    /** The number of elements. */
    @HostAccess.Export
    public long numel() {
        return tensor.numel();
    }

    /** The number of bytes. */
    @HostAccess.Export
    public long nbytes() {
        return tensor.nbytes();
    }

    /** The bytes per element. */
    @HostAccess.Export
    public long elementSize() {
        return tensor.element_size();
    }

    /** Where the contiguous bytes start; valid while this object lives. */
    @HostAccess.Export
    public long address() {
        return tensor.data_ptr().address();
    }

    /** True for integral and bool dtypes. */
    @HostAccess.Export
    public boolean isIntegral() {
        return !tensor.is_floating_point() && !tensor.is_complex();
    }

    /** Every value as a double, row-major (for {@code tolist()} of floating-point tensors). */
    @HostAccess.Export
    public double[] doubles() {
        double[] out = new double[(int) tensor.numel()];
        try (Tensor d = tensor.to(ScalarType.Double).contiguous()) {
            if (out.length > 0) {
                new DoublePointer(d.data_ptr()).capacity(out.length).get(out);
            }
        }
        return out;
    }

    /** Every value as a long, row-major (for {@code tolist()} of integral tensors). */
    @HostAccess.Export
    public long[] longs() {
        long[] out = new long[(int) tensor.numel()];
        try (Tensor l = tensor.to(ScalarType.Long).contiguous()) {
            if (out.length > 0) {
                new LongPointer(l.data_ptr()).capacity(out.length).get(out);
            }
        }
        return out;
    }

    /** {@code float32[2, 3]}. */
    @HostAccess.Export
    @Override
    public String toString() {
        return TorchTensors.describe(tensor);
    }

    /** The values, formatted like PyTorch prints them (at most {@code maxValues}). */
    @HostAccess.Export
    public String format(int maxValues) {
        return TorchTensors.format(tensor, maxValues);
    }

    /** Frees the memory now. Idempotent; any view over it is invalid afterwards. */
    @HostAccess.Export
    @Override
    public void close() {
        tensor.close();
    }
}
