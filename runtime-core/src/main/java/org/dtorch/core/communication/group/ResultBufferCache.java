package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Host buffers for collective results, kept between calls so that a large result is not a fresh
 * allocation each time. glibc serves a 64 MiB block with a new {@code mmap}, and the first write to each
 * of its pages faults: that cost more than Gloo's reduction itself (docs/communication-core.md, "Collective
 * speed").
 *
 * <p>A cached buffer is reused only when nothing outside the cache references its storage: the caller gets a
 * view (its own {@code TensorImpl} on the cached storage), so the storage's use count is 1 exactly when every
 * view the caller made, and every handle on them, is closed. A result the caller still holds is never handed
 * out again.
 *
 * <p>The cache holds at most {@link #maxBytes()} bytes; a result that would exceed it is allocated fresh and not
 * kept. Dropping an entry only drops the cache's reference: a caller holding a view keeps the memory alive.
 * Results smaller than {@link #MIN_BYTES} are never cached (the allocator reuses those without faults).
 *
 * <p>Configuration: {@value #MAX_BYTES_PROPERTY}, bytes per rank's backend, default {@value #DEFAULT_MAX_BYTES};
 * 0 turns caching off. The Network store keeps its received values in one of its own, with its own bound (public for
 * it: org.dtorch.core.communication.store).
 *
 * <p>Not thread-safe: one rank's thread uses an instance, as its backend.
 */
public final class ResultBufferCache implements AutoCloseable {
    /** System property: the bound on cached bytes of one rank's backend. */
    static final String MAX_BYTES_PROPERTY = "dtorch.comm.resultCacheBytes";
    /** Default bound: room for two 64 MiB results. */
    static final long DEFAULT_MAX_BYTES = 128L << 20;
    /** Smaller results are allocated fresh each time. */
    static final long MIN_BYTES = 256L << 10;

    private final long maxBytes;
    private final List<Tensor> buffers = new ArrayList<>();
    private long cachedBytes;

    /** A cache of at most {@code maxBytes} bytes; 0 caches nothing. */
    public ResultBufferCache(long maxBytes) {
        if (maxBytes < 0) {
            throw new IllegalArgumentException(MAX_BYTES_PROPERTY + " must be 0 or more, got " + maxBytes);
        }
        this.maxBytes = maxBytes;
    }

    /** A cache bounded by {@value #MAX_BYTES_PROPERTY}, or its default. */
    static ResultBufferCache fromSystemProperties() {
        String text = System.getProperty(MAX_BYTES_PROPERTY);
        if (text == null || text.isBlank()) {
            return new ResultBufferCache(DEFAULT_MAX_BYTES);
        }
        try {
            return new ResultBufferCache(Long.parseLong(text.strip()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("system property " + MAX_BYTES_PROPERTY + " must be a whole number of bytes, got '"
                + text + "'", e);
        }
    }

    long maxBytes() {
        return maxBytes;
    }

    /** Bytes held by the cache now. */
    long cachedBytes() {
        return cachedBytes;
    }

    /**
     * An uninitialized contiguous host tensor shaped and typed like {@code like}, which nothing else references.
     * The caller owns the returned handle.
     */
    Tensor emptyLike(Tensor like) {
        long nbytes = like.nbytes();
        if (nbytes < MIN_BYTES || nbytes > maxBytes || like.is_cuda()) {
            return like.new_empty(TorchTensors.shape(like));
        }
        return cached(TorchTensors.shape(like), TorchTensors.dtype(like), like.numel(), nbytes);
    }

    /**
     * An uninitialized contiguous host tensor of {@code shape} and {@code dtype}, which nothing else references. The
     * caller owns the returned handle.
     */
    public Tensor empty(long[] shape, torch.ScalarType dtype) {
        long numel = 1;
        for (long s : shape) {
            numel = Math.multiplyExact(numel, s);
        }
        long nbytes = Math.multiplyExact(numel, torch.elementSize(dtype));
        if (nbytes < MIN_BYTES || nbytes > maxBytes) {
            try (Tensor flat = allocate(numel, dtype)) {
                return flat.view(shape);
            }
        }
        return cached(shape, dtype, numel, nbytes);
    }

    private Tensor cached(long[] shape, torch.ScalarType dtype, long numel, long nbytes) {
        for (Tensor buffer : buffers) {
            if (TorchTensors.dtype(buffer) == dtype && buffer.numel() == numel && unreferenced(buffer)) {
                return buffer.view(shape);
            }
        }
        Tensor fresh = allocate(numel, dtype);
        makeRoom(nbytes);
        if (cachedBytes + nbytes <= maxBytes) {
            buffers.add(fresh);
            cachedBytes += nbytes;
            return fresh.view(shape);
        }
        try (fresh) {
            return fresh.view(shape);
        }
    }

    /** Drops unreferenced buffers (oldest first), then referenced ones, until {@code nbytes} more fit. */
    private void makeRoom(long nbytes) {
        for (boolean dropHeld : new boolean[] {false, true}) {
            for (int i = 0; i < buffers.size() && cachedBytes + nbytes > maxBytes; ) {
                Tensor buffer = buffers.get(i);
                if (dropHeld || unreferenced(buffer)) {
                    cachedBytes -= buffer.nbytes();
                    buffers.remove(i).close();
                } else {
                    i++;
                }
            }
        }
    }

    /** True when only the cache's own tensor references the storage: no view handed out is alive. */
    private static boolean unreferenced(Tensor buffer) {
        return buffer.use_count() == 1 && buffer.storage().use_count() == 1;
    }

    private static Tensor allocate(long numel, torch.ScalarType dtype) {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(dtype));
             MemoryFormatOptional format = new MemoryFormatOptional()) {
            return torch.empty(new long[] {numel}, options, format);
        }
    }

    /** Drops the cache's references; views still held keep their memory. Idempotent. */
    @Override
    public void close() {
        buffers.forEach(Tensor::close);
        buffers.clear();
        cachedBytes = 0;
    }

    @Override
    public String toString() {
        return "ResultBufferCache[" + buffers.size() + " buffers, " + cachedBytes + " of " + maxBytes + " bytes, "
            + Arrays.toString(buffers.stream().mapToLong(Tensor::nbytes).toArray()) + "]";
    }
}
