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
 * values, and the address of its contiguous bytes, over which the Python side lays zero-copy
 * {@code memoryview}s (through {@code ctypes}).
 *
 * <p>Lifetime: {@link #close()} frees the memory now, unless views pin it ({@link #pin()} / {@link #unpin()}):
 * then the tensor is closed at once (its values can no longer be read through it) and the memory is freed
 * when the last view is released. A tensor nobody closes is freed when the garbage collector finds it (JavaCPP's
 * deallocator). It charges nothing to the {@link org.dtorch.core.tensor.NativeMemoryBudget}: every value comes from a future, which
 * charges the value's bytes until it is collected, so dropped values already make the runtime request
 * collections. Shape, dtype and sizes stay readable after {@code close()}.
 *
 * <p>Thread-safe: every method may be called from any thread (Python view finalizers run on their own).
 */
public final class PyHostTensor implements AutoCloseable {
    private final Tensor tensor;
    private final long[] shape;
    private final ScalarType dtype;
    private final long nbytes;
    private final boolean integral;
    private int pins;
    private boolean closed;

    /** Takes ownership of {@code tensor}, made contiguous if it is not. */
    PyHostTensor(Tensor tensor) {
        Objects.requireNonNull(tensor, "tensor");
        if (tensor.is_contiguous()) {
            this.tensor = tensor;
        } else {
            this.tensor = tensor.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
            tensor.close();
        }
        this.shape = TorchTensors.shape(this.tensor);
        this.dtype = TorchTensors.dtype(this.tensor);
        this.nbytes = this.tensor.nbytes();
        this.integral = !this.tensor.is_floating_point() && !this.tensor.is_complex();
    }

    /** A new reference to the torch tensor (for Java callers); the caller closes it. */
    public synchronized Tensor torch() {
        ensureOpen();
        return new Tensor(tensor);
    }

    /** The shape. */
    @HostAccess.Export
    public long[] shape() {
        return shape.clone();
    }

    /** The PyTorch name of the dtype: {@code float32}, {@code int64}, ... */
    @HostAccess.Export
    public String dtype() {
        return TorchTensors.dtypeName(dtype);
    }

    /** The number of elements. */
    @HostAccess.Export
    public long numel() {
        long n = 1;
        for (long s : shape) {
            n *= s;
        }
        return n;
    }

    /** The number of bytes. */
    @HostAccess.Export
    public long nbytes() {
        return nbytes;
    }

    /** The bytes per element. */
    @HostAccess.Export
    public long elementSize() {
        return torch.elementSize(dtype);
    }

    /**
     * Where the contiguous bytes start, valid until {@link #close()}; to read them after this call returns,
     * {@link #pin()} instead.
     */
    @HostAccess.Export
    public synchronized long address() {
        ensureOpen();
        return tensor.data_ptr().address();
    }

    /**
     * Where the contiguous bytes start, kept valid until the matching {@link #unpin()} even if the tensor is
     * closed meanwhile (a view holds a pin).
     *
     * @throws IllegalStateException if the tensor is closed
     */
    @HostAccess.Export
    public synchronized long pin() {
        ensureOpen();
        pins++;
        return tensor.data_ptr().address();
    }

    /** Drops one pin; the last one frees the memory of a closed tensor. */
    @HostAccess.Export
    public synchronized void unpin() {
        if (pins == 0) {
            throw new IllegalStateException("unpin() without a matching pin() on HostTensor " + describe());
        }
        pins--;
        if (closed && pins == 0) {
            tensor.close();
        }
    }

    /** How many views pin the memory now. */
    @HostAccess.Export
    public synchronized int pinCount() {
        return pins;
    }

    /** True once {@link #close()} was called (the memory itself may wait for views to be released). */
    @HostAccess.Export
    public synchronized boolean isClosed() {
        return closed;
    }

    /** True for integral and bool dtypes. */
    @HostAccess.Export
    public boolean isIntegral() {
        return integral;
    }

    /** Every value as a double, row-major (for {@code tolist()} of floating-point tensors). */
    @HostAccess.Export
    public synchronized double[] doubles() {
        ensureOpen();
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
    public synchronized long[] longs() {
        ensureOpen();
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
        return describe();
    }

    private String describe() {
        return TorchTensors.dtypeName(dtype) + java.util.Arrays.toString(shape);
    }

    /** The values, formatted like PyTorch prints them (at most {@code maxValues}). */
    @HostAccess.Export
    public synchronized String format(int maxValues) {
        ensureOpen();
        return TorchTensors.format(tensor, maxValues);
    }

    /** Closes the tensor: frees the memory now, or when the last view pinning it is released. Idempotent. */
    @HostAccess.Export
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (pins == 0) {
            tensor.close();
        }
    }

    /** True once the memory was freed (closed and no view pins it). */
    synchronized boolean isFreed() {
        return tensor.isNull();
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("HostTensor " + describe() + " is closed");
        }
    }
}
