package org.dtorch.core.safetensors;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.Device;
import org.dtorch.core.memory.ProcessMemory;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Reads one device's shard of a tensor from a safetensors file into a new host tensor, and writes one into its place in
 * a file, touching only the shard's bytes.
 *
 * <p>A shard of a row-major tensor is a set of equal runs of contiguous bytes: the trailing dimensions the shard holds
 * whole are contiguous, and each index of the dimensions before the last partial one starts a run. A row shard
 * ({@code S(0)}) is one run; {@code S(1)} of a matrix is one run per row; a replica is the whole tensor, one run. The
 * runs are copied through memory mappings of the file ({@link FileChannel#map(FileChannel.MapMode, long, long, Arena)}),
 * one window of at most {@value #WINDOW_BYTES} bytes at a time, each in its own arena that is closed (unmapped) as soon
 * as the copy leaves it; a window starts at the first byte still needed and ends at the window size or the shard's last
 * byte. {@link ProcessMemory#FILE_MAPPINGS} counts the bytes mapped.
 *
 * <p>The file is checked to still hold the tensor's bytes before anything is mapped (a mapping past the end of a file
 * faults on access, and a writable one would grow the file).
 *
 * <p>Thread-safe: stateless; concurrent calls on disjoint shards of one file are safe.
 */
public final class MappedShards {
    /** The largest mapping one read or write holds at a time. */
    public static final long WINDOW_BYTES = 64L << 20;

    static {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            throw new UnsupportedOperationException("safetensors data is little-endian; this host is " + ByteOrder.nativeOrder());
        }
    }

    private MappedShards() {
    }

    /** One run: {@code length} bytes at {@code fileOffset} from the tensor's first byte, at {@code hostOffset} of the shard. */
    @FunctionalInterface
    interface RunConsumer {
        void accept(long fileOffset, long hostOffset, long length) throws IOException;
    }

    /**
     * A new host tensor holding the part of {@code entry} of shape {@code localShape} that starts at {@code offsets}, read
     * from {@code file} whose data section starts at {@code dataStart}. The caller owns it.
     *
     * @throws SafeTensorsException if the file no longer holds the tensor's bytes
     * @throws UncheckedIOException if the file cannot be read
     */
    public static Tensor read(Path file, long dataStart, TensorEntry entry, long[] localShape, long[] offsets) {
        return read(file, dataStart, entry, localShape, offsets, WINDOW_BYTES);
    }

    static Tensor read(Path file, long dataStart, TensorEntry entry, long[] localShape, long[] offsets, long window) {
        checkPart(entry, localShape, offsets);
        Tensor out;
        try (TensorOptions options = TorchTensors.options(entry.dtype().torch(), Device.cpu(0))) {
            out = torch.empty(localShape, options, new MemoryFormatOptional());
        }
        try {
            if (out.numel() > 0) {
                transfer(file, dataStart, entry, localShape, offsets, hostSegment(out), false, window);
            }
            return out;
        } catch (RuntimeException | Error e) {
            out.close();
            throw e;
        }
    }

    /** The whole tensor {@code entry} of {@code header}'s file as a new host tensor, which the caller owns. */
    public static Tensor readWhole(SafeTensorsHeader header, String name) {
        TensorEntry entry = header.tensor(name);
        if (entry == null) {
            throw new SafeTensorsException(header.file(), name, "no such tensor in the file");
        }
        return read(header.file(), header.dataStart(), entry, entry.shape(), new long[entry.shape().length]);
    }

    /**
     * Writes {@code local}, a host tensor of {@code entry}'s dtype holding the part of {@code entry} that starts at
     * {@code offsets}, into its bytes in {@code file} (already sized to hold the tensor). Returns the bytes written.
     *
     * @throws SafeTensorsException if the file is too short for the tensor or {@code local} does not fit the entry
     * @throws UncheckedIOException if the file cannot be written
     */
    public static long write(Path file, long dataStart, TensorEntry entry, long[] offsets, Tensor local) {
        return write(file, dataStart, entry, offsets, local, WINDOW_BYTES);
    }

    static long write(Path file, long dataStart, TensorEntry entry, long[] offsets, Tensor local, long window) {
        if (local.is_cuda() || TorchTensors.dtype(local) != entry.dtype().torch()) {
            throw new SafeTensorsException(file, entry.name(), "a shard to write must be a host tensor of " + entry.dtype() + ", got "
                + TorchTensors.describe(local));
        }
        long[] localShape = TorchTensors.shape(local);
        checkPart(entry, localShape, offsets);
        if (local.numel() == 0) {
            return 0;
        }
        try (Tensor contiguous = local.contiguous()) {
            transfer(file, dataStart, entry, localShape, offsets, hostSegment(contiguous), true, window);
            return contiguous.numel() * entry.dtype().elementSize();
        }
    }

    private static MemorySegment hostSegment(Tensor t) {
        return MemorySegment.ofAddress(TorchTensors.address(t)).reinterpret(t.numel() * t.element_size());
    }

    private static void checkPart(TensorEntry entry, long[] localShape, long[] offsets) {
        long[] shape = entry.shape();
        boolean fits = localShape.length == shape.length && offsets.length == shape.length;
        for (int d = 0; fits && d < shape.length; d++) {
            fits = localShape[d] >= 0 && offsets[d] >= 0 && offsets[d] + localShape[d] <= shape[d];
        }
        if (!fits) {
            throw new IllegalArgumentException("tensor '" + entry.name() + "' of shape " + Arrays.toString(shape) + " has no part of shape "
                + Arrays.toString(localShape) + " at " + Arrays.toString(offsets));
        }
    }

    /** Copies the shard's runs between the file and {@code host}, a window of the file mapped at a time. */
    private static void transfer(Path file, long dataStart, TensorEntry entry, long[] localShape, long[] offsets, MemorySegment host,
                                 boolean toFile, long window) {
        long base = dataStart + entry.begin();
        int elementSize = entry.dtype().elementSize();
        long[] span = span(entry.shape(), localShape, offsets, elementSize);
        StandardOpenOption[] modes = toFile ? new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE}
            : new StandardOpenOption[] {StandardOpenOption.READ};
        try (FileChannel channel = FileChannel.open(file, modes); Window mapped = new Window(channel, toFile, window, base + span[1])) {
            long size = channel.size();
            if (size < dataStart + entry.end()) {
                throw new SafeTensorsException(file, entry.name(), "the file has " + size + " bytes, but the tensor's data ends at byte "
                    + (dataStart + entry.end()) + " (the file changed or was truncated after its header was read)");
            }
            forEachRun(entry.shape(), localShape, offsets, elementSize, (fileOffset, hostOffset, length) -> {
                long at = base + fileOffset;
                long done = 0;
                while (done < length) {
                    MemorySegment segment = mapped.at(at + done);
                    long inWindow = Math.min(length - done, mapped.end - (at + done));
                    long segmentOffset = at + done - mapped.start;
                    if (toFile) {
                        MemorySegment.copy(host, hostOffset + done, segment, segmentOffset, inWindow);
                    } else {
                        MemorySegment.copy(segment, segmentOffset, host, hostOffset + done, inWindow);
                    }
                    done += inWindow;
                }
            });
        } catch (java.nio.file.NoSuchFileException e) {
            throw new SafeTensorsException(file, entry.name(), "the file is gone (it was there when its header was read)");
        } catch (IOException e) {
            throw new UncheckedIOException(file + ": tensor '" + entry.name() + "': " + (toFile ? "write" : "read") + " failed: " + e.getMessage(), e);
        }
    }

    /** The current mapping of a file: {@code [start, end)}, unmapped when the next one is made or at close. */
    private static final class Window implements AutoCloseable {
        private final FileChannel channel;
        private final FileChannel.MapMode mode;
        private final long size;
        private final long limit;
        private Arena arena;
        private MemorySegment segment;
        long start;
        long end;

        Window(FileChannel channel, boolean writable, long size, long limit) {
            this.channel = channel;
            this.mode = writable ? FileChannel.MapMode.READ_WRITE : FileChannel.MapMode.READ_ONLY;
            this.size = size;
            this.limit = limit;
        }

        /** The mapping that holds byte {@code position} of the file, made if the current one does not. */
        MemorySegment at(long position) throws IOException {
            if (segment != null && position >= start && position < end) {
                return segment;
            }
            close();
            long length = Math.min(size, limit - position);
            Arena next = Arena.ofConfined();
            try {
                segment = channel.map(mode, position, length, next);
            } catch (IOException | RuntimeException e) {
                next.close();
                throw e;
            }
            arena = next;
            start = position;
            end = position + length;
            ProcessMemory.FILE_MAPPINGS.add(length);
            return segment;
        }

        @Override
        public void close() {
            if (arena != null) {
                arena.close();
                ProcessMemory.FILE_MAPPINGS.subtract(end - start);
                arena = null;
                segment = null;
            }
        }
    }

    /**
     * The first byte and one past the last byte of the shard's runs, from the tensor's first byte ({@code {0, 0}} for an
     * empty shard).
     */
    static long[] span(long[] shape, long[] localShape, long[] offsets, int elementSize) {
        int k = lastPartialDim(shape, localShape);
        long[] strides = strides(shape);
        long runBytes = runBytes(shape, localShape, k, strides, elementSize);
        if (runBytes == 0) {
            return new long[] {0, 0};
        }
        long firstOffset = 0;
        long lastOffset = 0;
        for (int d = 0; d <= k; d++) {
            firstOffset += offsets[d] * strides[d];
            lastOffset += (offsets[d] + (d < k ? localShape[d] - 1 : 0)) * strides[d];
        }
        return new long[] {firstOffset * elementSize, lastOffset * elementSize + runBytes};
    }

    /** The last dimension the part does not hold whole, or -1 when it is the whole tensor. */
    private static int lastPartialDim(long[] shape, long[] localShape) {
        for (int d = shape.length - 1; d >= 0; d--) {
            if (localShape[d] != shape[d]) {
                return d;
            }
        }
        return -1;
    }

    private static long[] strides(long[] shape) {
        long[] strides = new long[shape.length];
        long acc = 1;
        for (int d = shape.length - 1; d >= 0; d--) {
            strides[d] = acc;
            acc *= shape[d];
        }
        return strides;
    }

    /** The bytes of one run, 0 for an empty part. */
    private static long runBytes(long[] shape, long[] localShape, int k, long[] strides, int elementSize) {
        for (long s : localShape) {
            if (s == 0) {
                return 0;
            }
        }
        if (k < 0) {
            return TensorEntry.numel(shape) * elementSize;
        }
        return localShape[k] * strides[k] * elementSize;
    }

    /**
     * Calls {@code consumer} for each run of the part of shape {@code localShape} at {@code offsets} of a row-major
     * tensor of {@code shape}, in ascending file order: its byte offset from the tensor's first byte, its offset in the
     * part (itself contiguous, row-major) and its length.
     */
    static void forEachRun(long[] shape, long[] localShape, long[] offsets, int elementSize, RunConsumer consumer) throws IOException {
        int k = lastPartialDim(shape, localShape);
        long[] strides = strides(shape);
        long runBytes = runBytes(shape, localShape, k, strides, elementSize);
        if (runBytes == 0) {
            return;
        }
        if (k < 0) {
            consumer.accept(0, 0, runBytes);
            return;
        }
        long[] index = new long[k];
        long hostOffset = 0;
        while (true) {
            long element = offsets[k] * strides[k];
            for (int d = 0; d < k; d++) {
                element += (offsets[d] + index[d]) * strides[d];
            }
            consumer.accept(element * elementSize, hostOffset, runBytes);
            hostOffset += runBytes;
            int d = k - 1;
            while (d >= 0) {
                if (++index[d] < localShape[d]) {
                    break;
                }
                index[d] = 0;
                d--;
            }
            if (d < 0) {
                return;
            }
        }
    }
}
