package org.dtorch.core.safetensors;

import java.util.Arrays;
import java.util.Objects;

/**
 * One tensor of a safetensors header: its name, dtype, shape and the byte range {@code [begin, end)} of its data,
 * relative to the first byte after the header.
 *
 * <p>Thread-safe: immutable (the shape is copied in and out).
 *
 * @param name  the tensor's name
 * @param dtype its dtype
 * @param shape its shape (row-major, little-endian elements)
 * @param begin the first byte of its data, from the start of the data section
 * @param end   one past its last byte
 */
public record TensorEntry(String name, SafeTensorsDtype dtype, long[] shape, long begin, long end) {

    /** Copies the shape. */
    public TensorEntry {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The element count, or -1 when it overflows a long. */
    public long numel() {
        return numel(shape);
    }

    /** The element count of {@code shape}, or -1 when it overflows a long. */
    public static long numel(long[] shape) {
        long n = 1;
        for (long s : shape) {
            try {
                n = Math.multiplyExact(n, s);
            } catch (ArithmeticException e) {
                return -1;
            }
        }
        return n;
    }

    /** The bytes of the data, {@code end - begin}. */
    public long nbytes() {
        return end - begin;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorEntry e && name.equals(e.name) && dtype == e.dtype && Arrays.equals(shape, e.shape)
            && begin == e.begin && end == e.end;
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, dtype, Arrays.hashCode(shape), begin, end);
    }

    @Override
    public String toString() {
        return name + " " + dtype + " " + Arrays.toString(shape) + " [" + begin + ", " + end + ")";
    }
}
