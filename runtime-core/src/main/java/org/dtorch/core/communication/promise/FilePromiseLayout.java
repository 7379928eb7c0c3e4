package org.dtorch.core.communication.promise;

import org.dtorch.core.shm.CudaIpcDescriptor;

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
 *   96      4      placement    INLINE: the value's bytes are in this region; VALUE_REGION: in region {name}-v;
 *                               CUDA_IPC: a CUDA tensor its completer lends (the descriptor at ipcDescriptor)
 *   100     4      writerPid    the process completing the promise (from WRITING on)
 *   104     4      abandoned    1 once the future side is gone: a setter removes what it creates
 *   108     4      released     1 once the future's process no longer uses a lent CUDA value: its completer frees it
 *   112     4      futurePid    the process that created the promise, where its future lives
 *   128     128    doorbell     name of the future process's doorbell region (int length + UTF-8)
 *   256     256    ipcDescriptor  a {@link CudaIpcDescriptor}, when placement is CUDA_IPC
 *   512     128    lenderBell   name of the doorbell of the process that lent a CUDA value; rung on release
 *   640     7552   error        the error's text (int length + UTF-8)
 *   8192    57344  inline bytes values of at most {@link #INLINE_CAPACITY} bytes
 * </pre>
 *
 * <p>A CUDA value stays the completer's: it keeps its reference until the future's process sets {@code released}
 * (its last view is gone, or it never read the value) or exits.
 *
 * <p>The completing side writes everything before it publishes VALUE or ERROR with a release-write of
 * {@code state}; readers acquire-read {@code state} before they read anything else.
 *
 * <p>Thread-safe: stateless.
 */
final class FilePromiseLayout {
    static final int MAGIC = 0x44545032; // "DTP2": version 2 has the CUDA IPC fields
    static final long MAGIC_OFFSET = 0;
    static final long STATE = 4;
    static final long SLEEPERS = 8;
    static final long KIND = 12;
    static final long DTYPE = 16;
    static final long NDIM = 20;
    static final long NBYTES = 24;
    static final long SHAPE = 32;
    static final long PLACEMENT = 96;
    static final long WRITER_PID = 100;
    static final long ABANDONED = 104;
    static final long RELEASED = 108;
    static final long FUTURE_PID = 112;
    static final long DOORBELL = 128;
    static final int DOORBELL_CAPACITY = 128;
    static final long IPC_DESCRIPTOR = DOORBELL + DOORBELL_CAPACITY;
    static final long LENDER_BELL = IPC_DESCRIPTOR + CudaIpcDescriptor.SIZE;
    static final long ERROR = LENDER_BELL + DOORBELL_CAPACITY;
    static final long INLINE_BYTES = 8192;
    static final int ERROR_CAPACITY = (int) (INLINE_BYTES - ERROR);
    static final long REGION_SIZE = 65536;
    static final int INLINE_CAPACITY = (int) (REGION_SIZE - INLINE_BYTES);
    static final int MAX_DIMS = 8;

    static final int PENDING = 0;
    static final int WRITING = 1;
    static final int VALUE = 2;
    static final int ERROR_STATE = 3;

    /** Placement: the bytes are in region {@code <name>-v}. */
    static final int VALUE_REGION = 0;
    /** Placement: the bytes are in this region. */
    static final int INLINE = 1;
    /** Placement: a CUDA tensor lent by the completer through CUDA IPC. */
    static final int CUDA_IPC = 2;

    static final int TENSOR = 1;
    static final int VOID = 2;

    private FilePromiseLayout() {
    }
}
