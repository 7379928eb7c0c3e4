package org.dtorch.core.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Objects;

/**
 * What a producer publishes, in shared memory, about one CUDA tensor it lends to other processes of the host
 * ({@link CudaIpcTensors}): the allocation that holds it (an IPC memory handle of the allocation's base, since
 * libtorch's caching allocator hands out sub-blocks of larger allocations), where the tensor starts in it, its
 * strides, and the event that marks the end of the producer's writes. Shape and dtype travel beside it, in the
 * entry or promise that embeds it. Owns its layout; File store entries and File promises embed its
 * {@link #SIZE} bytes and compute none of these offsets:
 *
 * <pre>
 *   offset  size  field
 *   0       4     device          the producer's CUDA device index; consumers view the memory on the same index
 *   4       4     producerPid     the exporting process: a consumer in that very process uses allocationBase as is
 *   8       4     flags           EMPTY: the tensor has no elements, so no memory and no handles
 *   12      4     ndim            number of strides
 *   16      8     allocationBase  the allocation's address in the producer
 *   24      8     allocationSize  its size in bytes
 *   32      8     offset          bytes from the allocation's base to the tensor's first element
 *   40      64    strides[8]      in elements
 *   104     64    memHandle       cudaIpcMemHandle_t of the allocation
 *   168     64    eventHandle     cudaIpcEventHandle_t of the event recorded after the producer's writes
 *   232     24    (unused)
 * </pre>
 *
 * <p>The writer fills every field before it publishes the embedding entry with a release-write; readers
 * acquire-read that entry's state first, so the descriptor needs no ordering of its own.
 *
 * <p>Thread-safe: an immutable value (the arrays are copied in and out).
 */
public final class CudaIpcDescriptor {
    /** Bytes a descriptor takes in shared memory. */
    public static final int SIZE = 256;
    /** Most dims a described tensor has. */
    public static final int MAX_DIMS = 8;
    /** Bytes of a CUDA IPC memory handle or event handle. */
    public static final int HANDLE_BYTES = 64;
    /** Flag: the tensor has no elements; nothing is shared. */
    public static final int EMPTY = 1;

    static final long DEVICE = 0;
    static final long PRODUCER_PID = 4;
    static final long FLAGS = 8;
    static final long NDIM = 12;
    static final long ALLOCATION_BASE = 16;
    static final long ALLOCATION_SIZE = 24;
    static final long OFFSET = 32;
    static final long STRIDES = 40;
    static final long MEM_HANDLE = STRIDES + 8L * MAX_DIMS;
    static final long EVENT_HANDLE = MEM_HANDLE + HANDLE_BYTES;
    static final long END = EVENT_HANDLE + HANDLE_BYTES;

    static {
        if (END > SIZE) {
            throw new ExceptionInInitializerError("CudaIpcDescriptor fields end at " + END + ", past its " + SIZE + " bytes");
        }
    }

    private final int device;
    private final int producerPid;
    private final int flags;
    private final long allocationBase;
    private final long allocationSize;
    private final long offset;
    private final long[] strides;
    private final byte[] memHandle;
    private final byte[] eventHandle;

    /**
     * A descriptor of a tensor with elements.
     *
     * @throws IllegalArgumentException if a handle is not {@value #HANDLE_BYTES} bytes, there are more than
     *                                  {@value #MAX_DIMS} strides, or the offset is outside the allocation
     */
    public CudaIpcDescriptor(int device, int producerPid, long allocationBase, long allocationSize, long offset, long[] strides,
                             byte[] memHandle, byte[] eventHandle) {
        this(device, producerPid, 0, allocationBase, allocationSize, offset, strides, memHandle, eventHandle);
    }

    private CudaIpcDescriptor(int device, int producerPid, int flags, long allocationBase, long allocationSize, long offset, long[] strides,
                              byte[] memHandle, byte[] eventHandle) {
        Objects.requireNonNull(strides, "strides");
        if (device < 0) {
            throw new IllegalArgumentException("device index " + device + " is negative");
        }
        if (strides.length > MAX_DIMS) {
            throw new IllegalArgumentException("a CUDA IPC descriptor holds at most " + MAX_DIMS + " strides, got " + strides.length);
        }
        if ((flags & EMPTY) == 0) {
            checkHandle("memory", memHandle);
            checkHandle("event", eventHandle);
            if (allocationSize <= 0 || offset < 0 || offset >= allocationSize) {
                throw new IllegalArgumentException("offset " + offset + " is outside an allocation of " + allocationSize + " bytes");
            }
        }
        for (long s : strides) {
            if (s < 0) {
                throw new IllegalArgumentException("negative stride in " + Arrays.toString(strides));
            }
        }
        this.device = device;
        this.producerPid = producerPid;
        this.flags = flags;
        this.allocationBase = allocationBase;
        this.allocationSize = allocationSize;
        this.offset = offset;
        this.strides = strides.clone();
        this.memHandle = memHandle == null ? new byte[HANDLE_BYTES] : memHandle.clone();
        this.eventHandle = eventHandle == null ? new byte[HANDLE_BYTES] : eventHandle.clone();
    }

    /** A descriptor of a tensor without elements: consumers make an empty tensor on {@code device}. */
    public static CudaIpcDescriptor empty(int device, int producerPid, long[] strides) {
        return new CudaIpcDescriptor(device, producerPid, EMPTY, 0, 0, 0, strides, null, null);
    }

    private static void checkHandle(String what, byte[] handle) {
        if (handle == null || handle.length != HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA IPC " + what + " handle has " + HANDLE_BYTES + " bytes, got "
                + (handle == null ? "none" : handle.length));
        }
    }

    /** Writes the {@value #SIZE} bytes at {@code at}. */
    public void writeTo(MemorySegment s, long at) {
        s.set(ValueLayout.JAVA_INT, at + DEVICE, device);
        s.set(ValueLayout.JAVA_INT, at + PRODUCER_PID, producerPid);
        s.set(ValueLayout.JAVA_INT, at + FLAGS, flags);
        s.set(ValueLayout.JAVA_INT, at + NDIM, strides.length);
        s.set(ValueLayout.JAVA_LONG, at + ALLOCATION_BASE, allocationBase);
        s.set(ValueLayout.JAVA_LONG, at + ALLOCATION_SIZE, allocationSize);
        s.set(ValueLayout.JAVA_LONG, at + OFFSET, offset);
        for (int d = 0; d < MAX_DIMS; d++) {
            s.set(ValueLayout.JAVA_LONG, at + STRIDES + 8L * d, d < strides.length ? strides[d] : 0);
        }
        MemorySegment.copy(memHandle, 0, s, ValueLayout.JAVA_BYTE, at + MEM_HANDLE, HANDLE_BYTES);
        MemorySegment.copy(eventHandle, 0, s, ValueLayout.JAVA_BYTE, at + EVENT_HANDLE, HANDLE_BYTES);
    }

    /**
     * Reads the descriptor at {@code at}.
     *
     * @throws IllegalStateException if the bytes do not hold a valid descriptor
     */
    public static CudaIpcDescriptor readFrom(MemorySegment s, long at) {
        int ndim = s.get(ValueLayout.JAVA_INT, at + NDIM);
        if (ndim < 0 || ndim > MAX_DIMS) {
            throw new IllegalStateException("a CUDA IPC descriptor names " + ndim + " dims; at most " + MAX_DIMS);
        }
        long[] strides = new long[ndim];
        for (int d = 0; d < ndim; d++) {
            strides[d] = s.get(ValueLayout.JAVA_LONG, at + STRIDES + 8L * d);
        }
        byte[] memHandle = new byte[HANDLE_BYTES];
        byte[] eventHandle = new byte[HANDLE_BYTES];
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, at + MEM_HANDLE, memHandle, 0, HANDLE_BYTES);
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, at + EVENT_HANDLE, eventHandle, 0, HANDLE_BYTES);
        try {
            return new CudaIpcDescriptor(s.get(ValueLayout.JAVA_INT, at + DEVICE), s.get(ValueLayout.JAVA_INT, at + PRODUCER_PID),
                s.get(ValueLayout.JAVA_INT, at + FLAGS), s.get(ValueLayout.JAVA_LONG, at + ALLOCATION_BASE),
                s.get(ValueLayout.JAVA_LONG, at + ALLOCATION_SIZE), s.get(ValueLayout.JAVA_LONG, at + OFFSET), strides, memHandle, eventHandle);
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException("shared memory holds no valid CUDA IPC descriptor: " + e.getMessage(), e);
        }
    }

    /**
     * Bytes from a tensor's first element to just past the last one it reaches, for {@code shape} with these
     * strides: {@code (1 + sum((shape[d] - 1) * strides[d])) * elementSize}, zero without elements.
     *
     * @throws IllegalArgumentException if {@code shape} does not have one size per stride
     */
    public long extentBytes(long[] shape, long elementSize) {
        if (shape.length != strides.length) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has " + shape.length + " dims, the strides "
                + Arrays.toString(strides) + " " + strides.length);
        }
        long last = 0;
        for (int d = 0; d < shape.length; d++) {
            if (shape[d] == 0) {
                return 0;
            }
            last = Math.addExact(last, Math.multiplyExact(shape[d] - 1, strides[d]));
        }
        return Math.multiplyExact(last + 1, elementSize);
    }

    /**
     * Checks that a tensor of {@code shape} with these strides, starting at {@link #offset()}, lies inside the
     * allocation: what a consumer checks before it views memory another process described.
     *
     * @throws IllegalStateException if it reaches past the allocation's end
     */
    public void checkFits(long[] shape, long elementSize) {
        if (isEmpty()) {
            return;
        }
        long extent = extentBytes(shape, elementSize);
        if (offset + extent > allocationSize) {
            throw new IllegalStateException("a tensor of shape " + Arrays.toString(shape) + ", strides " + Arrays.toString(strides)
                + " at offset " + offset + " reaches " + (offset + extent) + " bytes, past its allocation's " + allocationSize);
        }
    }

    /** The producer's CUDA device index. */
    public int device() {
        return device;
    }

    /** The exporting process. */
    public int producerPid() {
        return producerPid;
    }

    /** True for a tensor without elements: no memory, no handles. */
    public boolean isEmpty() {
        return (flags & EMPTY) != 0;
    }

    /** The allocation's address in the producer. */
    public long allocationBase() {
        return allocationBase;
    }

    /** The allocation's size in bytes. */
    public long allocationSize() {
        return allocationSize;
    }

    /** Bytes from the allocation's base to the tensor's first element. */
    public long offset() {
        return offset;
    }

    /** The tensor's strides, in elements (a copy). */
    public long[] strides() {
        return strides.clone();
    }

    /** The allocation's IPC memory handle (a copy). */
    public byte[] memHandle() {
        return memHandle.clone();
    }

    /** The IPC handle of the event after the producer's writes (a copy). */
    public byte[] eventHandle() {
        return eventHandle.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CudaIpcDescriptor d && d.device == device && d.producerPid == producerPid && d.flags == flags
            && d.allocationBase == allocationBase && d.allocationSize == allocationSize && d.offset == offset
            && Arrays.equals(d.strides, strides) && Arrays.equals(d.memHandle, memHandle) && Arrays.equals(d.eventHandle, eventHandle);
    }

    @Override
    public int hashCode() {
        return Objects.hash(device, producerPid, flags, allocationBase, allocationSize, offset, Arrays.hashCode(strides),
            Arrays.hashCode(memHandle));
    }

    @Override
    public String toString() {
        return isEmpty() ? "cuda-ipc(cuda:" + device + ", pid " + producerPid + ", empty)"
            : "cuda-ipc(cuda:" + device + ", pid " + producerPid + ", offset " + offset + " of " + allocationSize + " bytes, strides "
                + Arrays.toString(strides) + ")";
    }
}
