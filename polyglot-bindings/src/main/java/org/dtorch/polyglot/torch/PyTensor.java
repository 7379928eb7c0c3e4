package org.dtorch.polyglot.torch;

import java.lang.ref.Cleaner;
import java.util.Arrays;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.IValue;
import org.bytedeco.pytorch.IValueVector;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorImpl;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.NativeMemoryBudget;
import org.dtorch.core.tensor.TorchTensors;
import org.graalvm.polyglot.HostAccess;

/**
 * A libtorch tensor in this JVM as the Python {@code torch.Tensor} holds it: the handle never copies the values into
 * Python. It owns one reference to the tensor, kept as an {@link IValue} so that operators push it onto the
 * dispatcher's stack without making a new handle.
 *
 * <p>Lifetime: {@link #close()} releases the reference at once, unless zero-copy views pin the memory
 * ({@link #pin()} / {@link #unpin()}): then the handle is closed at once and the reference goes with the last
 * view. A handle nobody closes goes when the garbage collector finds it (GraalPy has no reference counts, so
 * that is when the Python object dies): JavaCPP's deallocator for small tensors, and for tensors of at least
 * {@value #CHARGED_BYTES} bytes a {@link Cleaner} registered with the {@link NativeMemoryBudget}, which charges
 * their bytes so that a program dropping large tensors gets collections before native memory runs out. Views
 * are charged their own bytes, not their base's.
 *
 * <p>Thread-safe: every method may be called from any thread (Python threads run concurrently during host calls,
 * and view finalizers run on their own).
 */
public final class PyTensor implements AutoCloseable {
    /** Tensors from this size on are charged to the native-memory budget; smaller ones cost less than their handles. */
    static final long CHARGED_BYTES = 16 * 1024;

    /** What the handle owns natively; the Cleaner's action refers to this, never to the handle. */
    private static final class Native implements Runnable {
        final IValue value;
        Tensor tensor;

        Native(IValue value) {
            this.value = value;
        }

        synchronized Tensor tensor() {
            if (tensor == null) {
                tensor = value.toTensor();
            }
            return tensor;
        }

        @Override
        public synchronized void run() {
            if (tensor != null) {
                tensor.close();
            }
            value.close();
        }
    }

    /** What stays readable after {@link #close()}: a closed value still says what it was. */
    private record Meta(long[] shape, String dtype, String device, long nbytes, long elementSize, boolean integral) {
    }

    private final Native holder;
    private final Cleaner.Cleanable cleanable;
    private int pins;
    private boolean closed;
    /** Set by {@link #close()}; shapes may change in place while open ({@code unsqueeze_}), so not cached before. */
    private Meta closedMeta;

    private PyTensor(IValue value, boolean charge) {
        this.holder = new Native(value);
        long bytes = 0;
        boolean cuda = false;
        if (charge) {
            TensorImpl impl = value.unsafeToTensorImpl();
            bytes = impl.numel() * impl.itemsize();
            cuda = bytes >= CHARGED_BYTES && impl.is_cuda();
        }
        this.cleanable = bytes >= CHARGED_BYTES
            ? NativeMemoryBudget.of(cuda ? DeviceKind.CUDA : DeviceKind.CPU).register(this, bytes, holder) : null;
    }

    /** A handle owning {@code value}, which must hold a defined tensor. */
    static PyTensor adopt(IValue value) {
        return new PyTensor(value, true);
    }

    /** A handle taking ownership of {@code tensor} (for Java callers). */
    public static PyTensor wrap(Tensor tensor) {
        try (tensor) {
            return new PyTensor(new IValue(tensor), true);
        }
    }

    /**
     * A handle taking ownership of a value that came back from the runtime, made contiguous if it is not (so that
     * zero-copy views lie over it). It charges nothing to the budget: the future it came from charges the value's
     * bytes until it is collected (the promise keeps its own reference), and charging twice only brought collections
     * earlier.
     */
    public static PyTensor wrapValue(Tensor tensor) {
        if (tensor.is_contiguous()) {
            try (tensor) {
                return new PyTensor(new IValue(tensor), false);
            }
        }
        try (tensor; Tensor contiguous = tensor.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous))) {
            return new PyTensor(new IValue(contiguous), false);
        }
    }

    /** A new reference to the torch tensor, for Java callers; the caller closes it. */
    public synchronized Tensor torch() {
        ensureOpen();
        return new Tensor(holder.tensor());
    }

    /** Pushes this tensor onto a dispatcher stack (one more reference, no new handle). */
    synchronized void pushTo(IValueVector stack) {
        ensureOpen();
        stack.push_back(holder.value);
    }

    /** A new {@link IValue} of this tensor; the caller closes it. */
    synchronized IValue newValue() {
        ensureOpen();
        return new IValue(holder.value);
    }

    /** The tensor itself, no new handle (for this package's callers, which neither keep nor close it). */
    synchronized Tensor t() {
        ensureOpen();
        return holder.tensor();
    }

    /** The shape. */
    @HostAccess.Export
    public long[] shape() {
        Meta m = closedMeta();
        return m != null ? m.shape().clone() : TorchTensors.shape(t());
    }

    /** The number of dimensions. */
    @HostAccess.Export
    public long dim() {
        Meta m = closedMeta();
        return m != null ? m.shape().length : t().dim();
    }

    /** The number of elements. */
    @HostAccess.Export
    public long numel() {
        Meta m = closedMeta();
        return m != null ? m.nbytes() / Math.max(1, m.elementSize()) : t().numel();
    }

    /** The PyTorch name of the dtype: {@code float32}, {@code int64}, ... */
    @HostAccess.Export
    public String dtype() {
        Meta m = closedMeta();
        return m != null ? m.dtype() : Dtypes.name(TorchTensors.dtype(t()));
    }

    /** {@code cpu}, or {@code cuda:N}. */
    @HostAccess.Export
    public String device() {
        Meta m = closedMeta();
        return m != null ? m.device() : deviceOf(t());
    }

    private static String deviceOf(Tensor t) {
        return t.is_cuda() ? "cuda:" + TorchTensors.device(t).index() : "cpu";
    }

    /** The bytes of the elements this tensor shows (a view's, not its base's). */
    @HostAccess.Export
    public long nbytes() {
        Meta m = closedMeta();
        if (m != null) {
            return m.nbytes();
        }
        Tensor t = t();
        return t.numel() * t.element_size();
    }

    /** The bytes per element. */
    @HostAccess.Export
    public long elementSize() {
        Meta m = closedMeta();
        return m != null ? m.elementSize() : t().element_size();
    }

    /** True for integral and bool dtypes. */
    @HostAccess.Export
    public boolean isIntegral() {
        Meta m = closedMeta();
        if (m != null) {
            return m.integral();
        }
        Tensor t = t();
        return !t.is_floating_point() && !t.is_complex();
    }

    /** Every value as a double, row-major (copied through the host for a CUDA tensor). */
    @HostAccess.Export
    public double[] doubles() {
        Tensor t = t();
        double[] out = new double[Math.toIntExact(t.numel())];
        try (Tensor d = t.to(ScalarType.Double).cpu().contiguous()) {
            if (out.length > 0) {
                new DoublePointer(d.data_ptr()).capacity(out.length).get(out);
            }
        }
        return out;
    }

    /** Every value as a long, row-major (copied through the host for a CUDA tensor). */
    @HostAccess.Export
    public long[] longs() {
        Tensor t = t();
        long[] out = new long[Math.toIntExact(t.numel())];
        try (Tensor l = t.to(ScalarType.Long).cpu().contiguous()) {
            if (out.length > 0) {
                new LongPointer(l.data_ptr()).capacity(out.length).get(out);
            }
        }
        return out;
    }

    /** True when this tensor's elements are contiguous in memory on the host, so a view may lie over them. */
    @HostAccess.Export
    public boolean isHostContiguous() {
        Tensor t = t();
        return !t.is_cuda() && t.is_contiguous();
    }

    /** A contiguous copy on the host (this tensor if it already is one), for zero-copy views. */
    @HostAccess.Export
    public PyTensor hostContiguous() {
        Tensor t = t();
        if (!t.is_cuda() && t.is_contiguous()) {
            return this;
        }
        try (Tensor cpu = t.cpu()) {
            return wrap(cpu.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous)));
        }
    }

    /** Where the elements start; valid until {@link #close()}. To read them after this call returns, {@link #pin()} instead. */
    @HostAccess.Export
    public synchronized long address() {
        return TorchTensors.address(t());
    }

    /**
     * Where the elements of this host tensor start, kept valid until the matching {@link #unpin()} even if the handle
     * is closed meanwhile (a view holds a pin).
     *
     * @throws IllegalStateException if the handle is closed, or the tensor is not contiguous on the host
     */
    @HostAccess.Export
    public synchronized long pin() {
        Tensor t = t();
        if (t.is_cuda() || !t.is_contiguous()) {
            throw new IllegalStateException("a view needs a contiguous tensor on the host; this one is " + describe()
                + " (call .contiguous() or .cpu() first)");
        }
        pins++;
        return TorchTensors.address(t);
    }

    /** Drops one pin; the last one releases the tensor of a closed handle. */
    @HostAccess.Export
    public synchronized void unpin() {
        if (pins == 0) {
            throw new IllegalStateException("unpin() without a matching pin() on " + describe());
        }
        pins--;
        if (closed && pins == 0) {
            release();
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

    /** The values, formatted like PyTorch prints them (at most {@code maxValues}), read through the host. */
    @HostAccess.Export
    public String format(int maxValues) {
        try (Tensor cpu = t().cpu()) {
            return TorchTensors.format(cpu, maxValues);
        }
    }

    /** True when both handles show the same tensor (the same TensorImpl), as after an in-place operator. */
    @HostAccess.Export
    public boolean sameTensor(PyTensor other) {
        return t().is_same(other.t());
    }

    /** Releases the reference now, or when the last view pinning it is released. Idempotent. */
    @HostAccess.Export
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        Tensor t = holder.tensor();
        closedMeta = new Meta(TorchTensors.shape(t), Dtypes.name(TorchTensors.dtype(t)), deviceOf(t), t.numel() * t.element_size(),
            t.element_size(), !t.is_floating_point() && !t.is_complex());
        closed = true;
        if (pins == 0) {
            release();
        }
    }

    private synchronized Meta closedMeta() {
        return closedMeta;
    }

    private void release() {
        if (cleanable != null) {
            cleanable.clean();
        } else {
            holder.run();
        }
    }

    /** True once the tensor reference was released (closed and no view pins it); for tests and Java callers. */
    public synchronized boolean isReleased() {
        return holder.value.isNull();
    }

    /** {@code float32[2, 3] on cpu}. */
    @HostAccess.Export
    @Override
    public synchronized String toString() {
        return closed ? "closed " + describe() : describe();
    }

    private String describe() {
        if (closed) {
            return closedMeta.dtype() + Arrays.toString(closedMeta.shape()) + " on " + closedMeta.device();
        }
        Tensor t = holder.tensor();
        return Dtypes.name(TorchTensors.dtype(t)) + Arrays.toString(TorchTensors.shape(t)) + " on "
            + (t.is_cuda() ? "cuda:" + TorchTensors.device(t).index() : "cpu");
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("the tensor " + describe() + " is closed");
        }
    }
}
