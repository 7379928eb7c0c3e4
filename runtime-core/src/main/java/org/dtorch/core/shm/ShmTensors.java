package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.PointerConsumer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * CPU tensors in and out of shared memory: a tensor's bytes copied into a region (one copy, by torch, so
 * any layout works), a tensor that views a region without copying (it keeps the mapping alive until
 * libtorch frees it), and small values copied out.
 *
 * <p>Thread-safe: the view registry is concurrent; the deleter may run on any thread.
 */
public final class ShmTensors {
    /** Views alive per data address; the deleter releases the region of the view it was given. */
    private static final Map<Long, ViewCount> VIEWS = new ConcurrentHashMap<>();
    private static final PointerConsumer DELETER = new PointerConsumer() {
        @Override
        public void call(Pointer data) {
            released(data.address());
        }
    };

    /** Options for each dtype, made once: building them costs several native calls. */
    private static final Map<ScalarType, TensorOptions> OPTIONS = new ConcurrentHashMap<>();
    private static final MemoryFormatOptional NO_MEMORY_FORMAT = new MemoryFormatOptional();

    private ShmTensors() {
    }

    private static TensorOptions options(ScalarType dtype) {
        return OPTIONS.computeIfAbsent(dtype, d -> new TensorOptions().dtype(new ScalarTypeOptional(d)));
    }

    /** The region behind the views that start at one address, and how many are alive. */
    private static final class ViewCount {
        final SharedRegion region;
        int count;

        ViewCount(SharedRegion region) {
            this.region = region;
        }
    }

    /** A pointer at a raw address, for {@code from_blob}. */
    private static final class RawPointer extends Pointer {
        RawPointer(long address) {
            this.address = address;
        }
    }

    /** Bytes of a tensor of {@code shape} and {@code dtype}. */
    public static long byteSize(long[] shape, ScalarType dtype) {
        long n = torch.elementSize(dtype);
        for (long s : shape) {
            n = Math.multiplyExact(n, s);
        }
        return n;
    }

    /**
     * Copies {@code value} (a CPU tensor, any layout) into {@code target} in row-major order. The target
     * must hold {@code value.numel() * elementSize} bytes.
     */
    public static void copyInto(Tensor value, MemorySegment target) {
        copyInto(value, TorchTensors.shape(value), TorchTensors.dtype(value), target);
    }

    /**
     * As {@link #copyInto(Tensor, MemorySegment)}, for a caller that read {@code value}'s shape and dtype already (each
     * read is a native call).
     */
    public static void copyInto(Tensor value, long[] shape, ScalarType dtype, MemorySegment target) {
        long bytes = byteSize(shape, dtype);
        if (target.byteSize() < bytes) {
            throw new IllegalArgumentException("a " + TorchTensors.describe(value) + " needs " + bytes + " bytes, the target has "
                + target.byteSize());
        }
        if (bytes == 0) {
            return;
        }
        if (value.is_contiguous()) {
            // One plain memcpy: libtorch's copy kernel splits the work into parallel chunks, which on a busy
            // machine moves memory slower than a single streaming copy does.
            MemorySegment.copy(MemorySegment.ofAddress(TorchTensors.address(value)).reinterpret(bytes), ValueLayout.JAVA_BYTE, 0, target,
                ValueLayout.JAVA_BYTE, 0, bytes);
            return;
        }
        try (RawPointer data = new RawPointer(target.address());
             Tensor view = torch.from_blob(data, shape, options(dtype))) {
            view.copy_(value);
        }
    }

    /** A new tensor with a copy of the bytes at {@code source}. */
    public static Tensor copyOut(MemorySegment source, long[] shape, ScalarType dtype) {
        Tensor out = empty(shape, dtype);
        copyOut(source, shape, dtype, TorchTensors.address(out));
        return out;
    }

    /** Copies the bytes of a value of {@code shape} and {@code dtype} at {@code source} to the memory at {@code address}. */
    public static void copyOut(MemorySegment source, long[] shape, ScalarType dtype, long address) {
        long bytes = byteSize(shape, dtype);
        if (bytes > 0) {
            MemorySegment.copy(source, ValueLayout.JAVA_BYTE, 0, MemorySegment.ofAddress(address).reinterpret(bytes), ValueLayout.JAVA_BYTE,
                0, bytes);
        }
    }

    /** A new contiguous CPU tensor of {@code shape} and {@code dtype}, its memory not initialized. */
    public static Tensor empty(long[] shape, ScalarType dtype) {
        return torch.empty(shape, options(dtype), NO_MEMORY_FORMAT);
    }

    /**
     * A tensor over the bytes of {@code region} starting at {@code offset}, without copying. The tensor
     * holds a reference to the region: the mapping lives until libtorch frees the tensor's storage.
     *
     * @throws IllegalStateException if the region was already unmapped
     */
    public static Tensor view(SharedRegion region, long offset, long[] shape, ScalarType dtype) {
        long bytes = byteSize(shape, dtype);
        if (offset < 0 || offset + bytes > region.size()) {
            throw new IllegalArgumentException("a view of " + bytes + " bytes at " + offset + " does not fit " + region);
        }
        if (!region.retain()) {
            throw new IllegalStateException(region + " is no longer mapped");
        }
        long address = region.address() + offset;
        VIEWS.compute(address, (a, c) -> {
            ViewCount count = c == null ? new ViewCount(region) : c;
            if (count.region != region) {
                throw new IllegalStateException("two mappings at one address: " + count.region + " and " + region);
            }
            count.count++;
            return count;
        });
        try (RawPointer data = new RawPointer(address)) {
            return torch.from_blob(data, shape, DELETER, options(dtype));
        } catch (RuntimeException | Error e) {
            released(address);
            throw e;
        }
    }

    /**
     * The region that holds the {@code nbytes} bytes at {@code address}, if a tensor of this process views
     * it ({@link #view}); null otherwise. The caller must hold a tensor over those bytes, which keeps the
     * region mapped.
     */
    public static SharedRegion regionContaining(long address, long nbytes) {
        for (ViewCount c : VIEWS.values()) {
            SharedRegion region = c.region;
            if (address >= region.address() && address + nbytes <= region.address() + region.size()) {
                return region;
            }
        }
        return null;
    }

    /** Number of tensors alive that view shared memory; for leak checks. */
    public static int liveViewCount() {
        int n = 0;
        for (ViewCount c : VIEWS.values()) {
            n += c.count; // a racy read is fine for a diagnostic count
        }
        return n;
    }

    private static void released(long address) {
        SharedRegion[] release = new SharedRegion[1];
        VIEWS.computeIfPresent(address, (a, c) -> {
            release[0] = c.region;
            return --c.count == 0 ? null : c;
        });
        if (release[0] != null) {
            release[0].release();
        }
    }
}
