package org.dtorch.core.communication.promise;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The outcome of a Network promise as the value of its key in the {@code TCPStore}, so that a completer on another host
 * needs only the store (a promise's value is one operator's result, usually small). One value, written once,
 * little-endian:
 *
 * <pre>
 *   offset        size        field
 *   0             1           tag: 'V' tensor value, 'D' done (a void promise's value), 'E' error
 *   tag 'V':
 *   1             4           dtype (libtorch's ScalarType code)
 *   5             4           ndim (at most {@value #MAX_DIMS})
 *   9             8 * ndim    shape
 *   9 + 8 * ndim  nbytes      the elements, row-major (nbytes at most {@value #MAX_VALUE_BYTES})
 *   tag 'E':
 *   1             4           FailureKind ordinal where the error happened
 *   5             rest        the error's text, UTF-8 ({@link RemoteFailureException#describe})
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
final class NetworkPromiseWire {
    /** The largest tensor that travels as a store value: 64 MiB of elements. */
    static final long MAX_VALUE_BYTES = 64L << 20;
    static final int MAX_DIMS = 64;
    static final byte VALUE = 'V';
    static final byte DONE = 'D';
    static final byte ERROR = 'E';

    private NetworkPromiseWire() {
    }

    /** A read outcome: a value (owned by the reader), or an error, or neither for a void promise's "done". */
    record Outcome(Tensor value, RemoteFailureException error) {
    }

    /**
     * The bytes of a CPU or CUDA {@code value} (a CUDA value is copied to the host first).
     *
     * @throws IllegalArgumentException for a value over {@link #MAX_VALUE_BYTES} or with more than {@link #MAX_DIMS} dims
     */
    static byte[] encodeValue(Tensor value, String key) {
        long[] shape = TorchTensors.shape(value);
        ScalarType dtype = TorchTensors.dtype(value);
        long nbytes = ShmTensors.byteSize(shape, dtype);
        if (nbytes > MAX_VALUE_BYTES || shape.length > MAX_DIMS) {
            throw new IllegalArgumentException("a Network promise (key " + key + ") carries at most " + MAX_VALUE_BYTES + " bytes and "
                + MAX_DIMS + " dims in its store value; got " + TorchTensors.describe(value) + " (" + nbytes + " bytes)");
        }
        ByteBuffer out = ByteBuffer.allocate(Math.toIntExact(9 + 8L * shape.length + nbytes)).order(ByteOrder.LITTLE_ENDIAN);
        out.put(VALUE).putInt(dtype.value).putInt(shape.length);
        for (long s : shape) {
            out.putLong(s);
        }
        try (Arena arena = Arena.ofConfined(); Tensor host = value.is_cuda() ? value.cpu() : new Tensor(value)) {
            MemorySegment elements = arena.allocate(Math.max(1, nbytes));
            ShmTensors.copyInto(host, shape, dtype, elements);
            MemorySegment.ofArray(out.array()).asSlice(out.position()).copyFrom(elements.asSlice(0, nbytes));
        }
        return out.array();
    }

    /** The bytes of a void promise's "done". */
    static byte[] encodeDone() {
        return new byte[] {DONE};
    }

    /** The bytes of {@code error}: its kind and its text. */
    static byte[] encodeError(Throwable error) {
        byte[] text = RemoteFailureException.describe(error).getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(5 + text.length).order(ByteOrder.LITTLE_ENDIAN).put(ERROR).putInt(FailureKind.of(error).ordinal())
            .put(text).array();
    }

    /**
     * Reads an outcome written by {@link #encodeValue}, {@link #encodeDone} or {@link #encodeError}; a value becomes a
     * new CPU tensor.
     *
     * @throws IllegalStateException naming {@code key} if the bytes are not an outcome of this layout
     */
    static Outcome decode(byte[] bytes, String key) {
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        byte tag = bytes.length == 0 ? 0 : in.get();
        switch (tag) {
            case DONE -> {
                return new Outcome(null, null);
            }
            case ERROR -> {
                FailureKind kind = FailureKind.fromOrdinal(in.getInt());
                String text = new String(bytes, in.position(), in.remaining(), StandardCharsets.UTF_8);
                return new Outcome(null, new RemoteFailureException(kind, text));
            }
            case VALUE -> {
                return new Outcome(decodeValue(in, bytes, key), null);
            }
            default -> throw new IllegalStateException("the value of key " + key + " is not a Network promise's outcome ("
                + bytes.length + " bytes, first " + tag + ")");
        }
    }

    private static Tensor decodeValue(ByteBuffer in, byte[] bytes, String key) {
        int code = in.getInt();
        int ndim = in.getInt();
        ScalarType dtype = TorchTensors.ofCode(code);
        if (dtype == null || ndim < 0 || ndim > MAX_DIMS || in.remaining() < 8L * ndim) {
            throw new IllegalStateException("the value of key " + key + " has a bad header (dtype code " + code + ", ndim " + ndim + ")");
        }
        long[] shape = new long[ndim];
        for (int d = 0; d < ndim; d++) {
            shape[d] = in.getLong();
        }
        long nbytes = ShmTensors.byteSize(shape, dtype);
        if (nbytes != in.remaining()) {
            throw new IllegalStateException("the value of key " + key + " has " + in.remaining() + " bytes of elements, its header says "
                + nbytes);
        }
        return ShmTensors.copyOut(MemorySegment.ofArray(bytes).asSlice(in.position()), shape, dtype);
    }
}
