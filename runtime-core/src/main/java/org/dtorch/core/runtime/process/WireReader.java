package org.dtorch.core.runtime.process;

import java.lang.foreign.MemorySegment;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Reads what {@link WireWriter} wrote, refusing anything that does not fit: every read checks that the
 * bytes are there, every length and count against what is left and against a limit, every enum code
 * against the known ones. A violation is a {@link ProtocolException} naming what was being read and where.
 *
 * <p>Not thread-safe: one thread reads one message.
 */
public final class WireReader {
    /** Most elements of an array, characters of a string, or dimensions of a shape that a message may hold. */
    public static final int MAX_COUNT = 1 << 20;
    private static final int MAX_DIMS = 64;
    /** A strict decoder per thread: malformed UTF-8 is an error, not a replacement character. */
    private static final ThreadLocal<java.nio.charset.CharsetDecoder> UTF8 = ThreadLocal.withInitial(
        () -> StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT));

    private final byte[] bytes;
    private int position;
    private final int limit;

    /** Reads {@code bytes[offset, offset + length)}. */
    public WireReader(byte[] bytes, int offset, int length) {
        this.bytes = bytes;
        this.position = offset;
        this.limit = offset + length;
    }

    private void need(int n, String what) {
        if (n < 0 || limit - position < n) {
            throw new ProtocolException("truncated message: " + what + " needs " + n + " bytes at offset " + position + ", "
                + (limit - position) + " left");
        }
    }

    public int getByte(String what) {
        need(1, what);
        return bytes[position++];
    }

    /** A byte in {@code [min, max]}. */
    public int getByteIn(String what, int min, int max) {
        int b = getByte(what);
        if (b < min || b > max) {
            throw new ProtocolException(what + ": " + b + " is outside [" + min + ", " + max + "]");
        }
        return b;
    }

    public boolean getBoolean(String what) {
        int b = getByte(what);
        if (b != 0 && b != 1) {
            throw new ProtocolException(what + ": a boolean is 0 or 1, got " + b);
        }
        return b == 1;
    }

    public int getInt(String what) {
        need(4, what);
        int v = ((bytes[position] & 0xff) << 24) | ((bytes[position + 1] & 0xff) << 16) | ((bytes[position + 2] & 0xff) << 8)
            | (bytes[position + 3] & 0xff);
        position += 4;
        return v;
    }

    public long getLong(String what) {
        long high = getInt(what) & 0xffffffffL;
        long low = getInt(what) & 0xffffffffL;
        return (high << 32) | low;
    }

    public double getDouble(String what) {
        return Double.longBitsToDouble(getLong(what));
    }

    /** A count in {@code [0, max]}. */
    public int getCount(String what, int max) {
        int n = getInt(what);
        if (n < 0 || n > max) {
            throw new ProtocolException(what + ": count " + n + " is outside [0, " + max + "]");
        }
        return n;
    }

    /** An int in {@code [min, max]}. */
    public int getIntIn(String what, int min, int max) {
        int v = getInt(what);
        if (v < min || v > max) {
            throw new ProtocolException(what + ": " + v + " is outside [" + min + ", " + max + "]");
        }
        return v;
    }

    public String getString(String what) {
        int n = getCount(what, MAX_COUNT);
        need(n, what);
        try {
            String s = UTF8.get().decode(ByteBuffer.wrap(bytes, position, n)).toString();
            position += n;
            return s;
        } catch (CharacterCodingException e) {
            throw new ProtocolException(what + ": not UTF-8", e);
        }
    }

    public long[] getLongs(String what) {
        int n = getCount(what, MAX_COUNT);
        need(8 * n, what);
        long[] values = new long[n];
        for (int i = 0; i < n; i++) {
            values[i] = getLong(what);
        }
        return values;
    }

    public int[] getInts(String what) {
        int n = getCount(what, MAX_COUNT);
        need(4 * n, what);
        int[] values = new int[n];
        for (int i = 0; i < n; i++) {
            values[i] = getInt(what);
        }
        return values;
    }

    /** A libtorch dtype this libtorch knows. */
    public ScalarType getDtype(String what) {
        int code = getInt(what);
        ScalarType dtype = TorchTensors.ofCode(code);
        if (dtype == null) {
            throw new ProtocolException(what + ": unknown dtype code " + code);
        }
        return dtype;
    }

    /** A shape: at most 64 non-negative sizes. */
    public long[] getShape(String what) {
        long[] shape = getLongs(what);
        if (shape.length > MAX_DIMS) {
            throw new ProtocolException(what + ": " + shape.length + " dims, at most " + MAX_DIMS);
        }
        for (long s : shape) {
            if (s < 0) {
                throw new ProtocolException(what + ": negative size " + s);
            }
        }
        return shape;
    }

    /** A tensor written by {@link WireWriter#putTensor}, as a new tensor the caller owns. */
    public Tensor getTensor(String what) {
        ScalarType dtype = getDtype(what + " dtype");
        long[] shape = getShape(what + " shape");
        long nbytes;
        try {
            nbytes = ShmTensors.byteSize(shape, dtype);
        } catch (ArithmeticException e) {
            throw new ProtocolException(what + ": the shape overflows", e);
        }
        int kind = getByte(what + " kind");
        if (kind == WireWriter.inlineTag()) {
            int n = getCount(what + " bytes", Integer.MAX_VALUE);
            if (n != nbytes) {
                throw new ProtocolException(what + ": " + n + " bytes for a tensor of " + nbytes);
            }
            need(n, what);
            Tensor t = ShmTensors.copyOut(MemorySegment.ofArray(bytes).asSlice(position, n), shape, dtype);
            position += n;
            return t;
        }
        if (kind == WireWriter.sharedTag()) {
            String name = getString(what + " region");
            if (!name.startsWith(SharedRegion.PREFIX) || name.contains("/")) {
                throw new ProtocolException(what + ": '" + name + "' is not a shared-memory name of this runtime");
            }
            try (SharedRegion region = SharedRegion.open(name).orElseThrow(() -> new ProtocolException(what + ": shared memory "
                + name + " does not exist"))) {
                if (region.size() < nbytes) {
                    throw new ProtocolException(what + ": shared memory " + name + " has " + region.size() + " bytes, the tensor needs "
                        + nbytes);
                }
                return ShmTensors.copyOut(region.segment(), shape, dtype);
            }
        }
        throw new ProtocolException(what + ": unknown tensor encoding " + kind);
    }

    /** The read position (for callers that cache what a span of bytes decodes to). */
    int position() {
        return position;
    }

    /** Bytes {@code [from, to)} of the message, for a cache key. */
    byte[] span(int from, int to) {
        return java.util.Arrays.copyOfRange(bytes, from, to);
    }

    /** Bytes left unread. */
    public int remaining() {
        return limit - position;
    }

    /** Fails if bytes are left: a message must be read exactly. */
    public void expectEnd(String what) {
        if (position != limit) {
            throw new ProtocolException(what + ": " + (limit - position) + " unexpected bytes at the end");
        }
    }
}
