package org.dtorch.core.runtime.process;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Writes the compact binary encoding of control messages: big-endian fixed-width numbers, strings and
 * arrays prefixed with their length, tensors as dtype, shape and bytes. {@link WireReader} reads it back.
 *
 * <p>A tensor of more than {@link #INLINE_TENSOR_LIMIT} bytes is not copied into the message: it goes into
 * a shared-memory region of its own, which the message names and which lives until the resources of the
 * message are closed ({@link #resources()}).
 *
 * <p>Not thread-safe: one thread writes one message.
 */
public final class WireWriter {
    /** Tensors up to this many bytes travel inside the message. */
    public static final long INLINE_TENSOR_LIMIT = 256 * 1024;
    private static final byte INLINE = 1;
    private static final byte SHARED = 2;

    private byte[] buffer = new byte[256];
    private int position;
    private final List<AutoCloseable> resources = new ArrayList<>();

    private void ensure(int more) {
        if (position + more > buffer.length) {
            buffer = Arrays.copyOf(buffer, Math.max(buffer.length * 2, position + more));
        }
    }

    public WireWriter putByte(int value) {
        ensure(1);
        buffer[position++] = (byte) value;
        return this;
    }

    public WireWriter putBoolean(boolean value) {
        return putByte(value ? 1 : 0);
    }

    public WireWriter putInt(int value) {
        ensure(4);
        buffer[position++] = (byte) (value >>> 24);
        buffer[position++] = (byte) (value >>> 16);
        buffer[position++] = (byte) (value >>> 8);
        buffer[position++] = (byte) value;
        return this;
    }

    public WireWriter putLong(long value) {
        putInt((int) (value >>> 32));
        return putInt((int) value);
    }

    public WireWriter putDouble(double value) {
        return putLong(Double.doubleToRawLongBits(value));
    }

    public WireWriter putString(String value) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        putInt(bytes.length);
        return putBytes(bytes);
    }

    public WireWriter putBytes(byte[] bytes) {
        ensure(bytes.length);
        System.arraycopy(bytes, 0, buffer, position, bytes.length);
        position += bytes.length;
        return this;
    }

    public WireWriter putLongs(long[] values) {
        putInt(values.length);
        for (long v : values) {
            putLong(v);
        }
        return this;
    }

    public WireWriter putInts(int[] values) {
        putInt(values.length);
        for (int v : values) {
            putInt(v);
        }
        return this;
    }

    /** A libtorch dtype, by its code. */
    public WireWriter putDtype(ScalarType dtype) {
        return putInt(dtype.value);
    }

    /**
     * A CPU tensor's dtype, shape and values (row-major). Large tensors go through shared memory: the
     * region is created now and removed when {@link #resources()} are closed. With no {@code sharedName} (the reader
     * is on another host) every tensor goes inline.
     *
     * @throws IllegalArgumentException if an inline tensor cannot fit a control frame
     */
    public WireWriter putTensor(Tensor value, String sharedName) {
        long[] shape = TorchTensors.shape(value);
        ScalarType dtype = TorchTensors.dtype(value);
        long nbytes = ShmTensors.byteSize(shape, dtype);
        if (sharedName == null && nbytes > ControlChannel.MAX_PAYLOAD - position - 1024) {
            throw new IllegalArgumentException("a tensor of " + nbytes + " bytes (shape " + java.util.Arrays.toString(shape)
                + ") does not fit a control frame of " + ControlChannel.MAX_FRAME + " bytes to a worker on another node");
        }
        putDtype(dtype);
        putLongs(shape);
        if (sharedName == null || nbytes <= INLINE_TENSOR_LIMIT) {
            putByte(INLINE);
            putInt((int) nbytes);
            ensure((int) nbytes);
            MemorySegment target = MemorySegment.ofArray(buffer).asSlice(position, nbytes);
            try (Tensor contiguous = value.contiguous()) {
                if (nbytes > 0) {
                    MemorySegment.copy(MemorySegment.ofAddress(TorchTensors.address(contiguous)).reinterpret(nbytes), ValueLayout.JAVA_BYTE, 0,
                        target, ValueLayout.JAVA_BYTE, 0, nbytes);
                }
            }
            position += (int) nbytes;
            return this;
        }
        SharedRegion region = SharedRegion.create(sharedName, nbytes)
            .orElseThrow(() -> new IllegalStateException("shared memory " + sharedName + " exists already"));
        try {
            ShmTensors.copyInto(value, region.segment());
        } catch (RuntimeException e) {
            region.unlink();
            region.close();
            throw e;
        }
        resources.add(() -> {
            region.unlink();
            region.close();
        });
        putByte(SHARED);
        return putString(sharedName);
    }

    /** What the message holds outside itself (shared memory of large tensors); close once it was used. */
    public List<AutoCloseable> resources() {
        return List.copyOf(resources);
    }

    /** The bytes written so far. */
    public byte[] toByteArray() {
        return Arrays.copyOf(buffer, position);
    }

    /** The number of bytes written so far. */
    public int size() {
        return position;
    }

    static byte inlineTag() {
        return INLINE;
    }

    static byte sharedTag() {
        return SHARED;
    }
}
