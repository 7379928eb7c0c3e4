package org.dtorch.core.communication.promise;

/**
 * The layout of a File promise's shared-memory region (64 KiB, sparse); nobody else computes these offsets.
 *
 * <pre>
 *   offset  size   field
 *   0       4      magic        written last by the creator (release)
 *   4       4      state        PENDING, WRITING, VALUE, ERROR; the futex word waiters sleep on
 *   8       4      sleepers     threads asleep on state
 *   12      4      kind         TENSOR or VOID
 *   16      4      dtype        libtorch ScalarType code of the value
 *   20      4      ndim
 *   24      8      nbytes
 *   32      64     shape[8]
 *   96      4      inline       1 when the value's bytes are in this region, 0 when in region {name}-v
 *   100     4      writerPid    the process completing the promise, while state is WRITING
 *   104     4      abandoned    1 once the future side is gone: a setter removes what it creates
 *   128     128    doorbell     name of the future process's doorbell region (int length + UTF-8)
 *   256     256    deviceSlot   reserved for CUDA IPC handles (the GPU issue)
 *   512     7680   error        the error's text (int length + UTF-8)
 *   8192    57344  inline bytes values of at most {@link #INLINE_CAPACITY} bytes
 * </pre>
 *
 * <p>The completing side writes everything before it publishes VALUE or ERROR with a release-write of
 * {@code state}; readers acquire-read {@code state} before they read anything else.
 *
 * <p>Thread-safe: stateless.
 */
final class FilePromiseLayout {
    static final int MAGIC = 0x44545031; // "DTP1"
    static final long MAGIC_OFFSET = 0;
    static final long STATE = 4;
    static final long SLEEPERS = 8;
    static final long KIND = 12;
    static final long DTYPE = 16;
    static final long NDIM = 20;
    static final long NBYTES = 24;
    static final long SHAPE = 32;
    static final long INLINE = 96;
    static final long WRITER_PID = 100;
    static final long ABANDONED = 104;
    static final long DOORBELL = 128;
    static final int DOORBELL_CAPACITY = 128;
    static final long ERROR = 512;
    static final int ERROR_CAPACITY = 7680;
    static final long INLINE_BYTES = 8192;
    static final long REGION_SIZE = 65536;
    static final int INLINE_CAPACITY = (int) (REGION_SIZE - INLINE_BYTES);
    static final int MAX_DIMS = 8;

    static final int PENDING = 0;
    static final int WRITING = 1;
    static final int VALUE = 2;
    static final int ERROR_STATE = 3;

    static final int TENSOR = 1;
    static final int VOID = 2;

    private FilePromiseLayout() {
    }
}
