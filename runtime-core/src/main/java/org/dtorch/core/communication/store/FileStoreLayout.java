package org.dtorch.core.communication.store;

import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.ShmMonitor;

/**
 * The layout of a {@link FileTensorStore}'s control region, in the manner of Agrona's {@code *Descriptor}
 * classes: every offset is the previous field's offset plus its named size (or that sum aligned up), so a
 * field can only move by changing a size here; nobody else computes these offsets.
 *
 * <pre>
 * header (one page)
 *   offset  size   field
 *   0       4      magic            written last by the creator (release); openers read it (acquire)
 *   4       4      version
 *   8       4      worldSize
 *   12      4      entryCapacity
 *   16      16     monitor          {@link ShmMonitor}: lock, change sequence, sleepers
 *   32      4      barrierArrived
 *   36      4      barrierGeneration
 *   40      8      storeKeyHash
 *   64      2048   pids[512]        (from the next cache line) the process of each rank, kept after close
 *                                   (the same-process check)
 *   2112    512    open[512]        1 while the rank's instance is open (one byte per rank)
 *   2624    1024   storeKey         int length + UTF-8
 * entries (entryCapacity x one page, from the page after the header)
 *   0       4      state            FREE, RESERVED (being filled by its producer), LIVE
 *   4       4      getCount
 *   8       4      gets
 *   12      4      finishes
 *   16      4      producerRank
 *   20      4      dtype            libtorch ScalarType code
 *   24      4      ndim
 *   28      4      placement        where the value is: INLINE (in this entry), DATA_REGION (a data region),
 *                                   CUDA_IPC (lent by its producer through CUDA IPC: the descriptor below); or'ed
 *                                   with TO_CUDA when the producer set a CPU value for CUDA consumers
 *   32      8      nbytes
 *   40      8      dataSequence     names the producer's data region: {control}-r{rank}-{sequence}
 *   48      8      keyHash
 *   56      64     shape[8]
 *   120     128    (reserved)       version 1's inline flag and device slot; unused, kept so that no field moves
 *   248     256    key              int length + UTF-8, at most {@link #MAX_KEY_BYTES}
 *   504     8      dataOffset       where the value starts in its data region
 *   512     256    dataName         the data region, when the value was allocated in shared memory already
 *                                   ({@link FileTensorStore#allocate}): int length + UTF-8; empty otherwise
 *   768     256    cudaIpc          a {@link CudaIpcDescriptor}, when placement is CUDA_IPC
 *   1024    3072   inline bytes     values of at most {@link #INLINE_CAPACITY} bytes, to the end of the page
 * </pre>
 *
 * <p>Every field except {@code magic} and the monitor's words is read and written with the monitor's lock
 * held. {@link FileStoreEntries} reads and writes the entries, {@link FileStorePeers} the pids and open
 * flags, {@link FileStoreHeader} the rest of the header.
 *
 * <p>Thread-safe: stateless.
 */
final class FileStoreLayout {
    static final int SIZE_OF_BYTE = Byte.BYTES;
    static final int SIZE_OF_INT = Integer.BYTES;
    static final int SIZE_OF_LONG = Long.BYTES;
    /** The alignment of the pids, so that the rank table starts on a line of its own. */
    static final int CACHE_LINE_LENGTH = 64;
    /** The header's size and each entry's: a page, so that the entries are page-aligned. */
    static final int PAGE_SIZE = 4096;

    static final int MAGIC = 0x44545331; // "DTS1"
    /** 2: the placement field and the CUDA IPC descriptor (version 1 had an inline flag and a reserved device slot). */
    static final int VERSION = 2;
    static final int MAX_WORLD_SIZE = 512;
    static final int ENTRY_CAPACITY = 128;
    static final int MAX_DIMS = 8;
    static final int MAX_KEY_BYTES = 252;
    static final int MAX_STORE_KEY_BYTES = 1020;
    /** A string field holds an int length, then at most this many UTF-8 bytes less the length. */
    static final int KEY_FIELD_LENGTH = SIZE_OF_INT + MAX_KEY_BYTES;
    static final int STORE_KEY_FIELD_LENGTH = SIZE_OF_INT + MAX_STORE_KEY_BYTES;
    static final int DATA_NAME_CAPACITY = 256;
    /** Version 1's inline flag and device slot between the shape and the key, unused since. */
    static final int ENTRY_RESERVED_LENGTH = 128;

    // ---- header ----------------------------------------------------------------------------------------
    static final long MAGIC_OFFSET = 0;
    static final long VERSION_OFFSET = MAGIC_OFFSET + SIZE_OF_INT;
    static final long WORLD_SIZE_OFFSET = VERSION_OFFSET + SIZE_OF_INT;
    static final long ENTRY_CAPACITY_OFFSET = WORLD_SIZE_OFFSET + SIZE_OF_INT;
    static final long MONITOR_OFFSET = ENTRY_CAPACITY_OFFSET + SIZE_OF_INT;
    static final long BARRIER_ARRIVED_OFFSET = MONITOR_OFFSET + ShmMonitor.SIZE;
    static final long BARRIER_GENERATION_OFFSET = BARRIER_ARRIVED_OFFSET + SIZE_OF_INT;
    static final long STORE_KEY_HASH_OFFSET = BARRIER_GENERATION_OFFSET + SIZE_OF_INT;
    static final long PIDS_OFFSET = align(STORE_KEY_HASH_OFFSET + SIZE_OF_LONG, CACHE_LINE_LENGTH);
    static final long OPEN_OFFSET = PIDS_OFFSET + (long) SIZE_OF_INT * MAX_WORLD_SIZE;
    static final long STORE_KEY_OFFSET = OPEN_OFFSET + (long) SIZE_OF_BYTE * MAX_WORLD_SIZE;
    static final long HEADER_LENGTH = align(STORE_KEY_OFFSET + STORE_KEY_FIELD_LENGTH, PAGE_SIZE);

    // ---- one entry, from its start -----------------------------------------------------------------------
    static final long STATE_OFFSET = 0;
    static final long GET_COUNT_OFFSET = STATE_OFFSET + SIZE_OF_INT;
    static final long GETS_OFFSET = GET_COUNT_OFFSET + SIZE_OF_INT;
    static final long FINISHES_OFFSET = GETS_OFFSET + SIZE_OF_INT;
    static final long PRODUCER_OFFSET = FINISHES_OFFSET + SIZE_OF_INT;
    static final long DTYPE_OFFSET = PRODUCER_OFFSET + SIZE_OF_INT;
    static final long NDIM_OFFSET = DTYPE_OFFSET + SIZE_OF_INT;
    static final long PLACEMENT_OFFSET = NDIM_OFFSET + SIZE_OF_INT;
    static final long NBYTES_OFFSET = PLACEMENT_OFFSET + SIZE_OF_INT;
    static final long DATA_SEQUENCE_OFFSET = NBYTES_OFFSET + SIZE_OF_LONG;
    static final long KEY_HASH_OFFSET = DATA_SEQUENCE_OFFSET + SIZE_OF_LONG;
    static final long SHAPE_OFFSET = KEY_HASH_OFFSET + SIZE_OF_LONG;
    static final long ENTRY_RESERVED_OFFSET = SHAPE_OFFSET + (long) SIZE_OF_LONG * MAX_DIMS;
    static final long KEY_OFFSET = ENTRY_RESERVED_OFFSET + ENTRY_RESERVED_LENGTH;
    static final long DATA_OFFSET_OFFSET = KEY_OFFSET + KEY_FIELD_LENGTH;
    static final long DATA_NAME_OFFSET = DATA_OFFSET_OFFSET + SIZE_OF_LONG;
    static final long CUDA_IPC_OFFSET = DATA_NAME_OFFSET + DATA_NAME_CAPACITY;
    static final long INLINE_BYTES_OFFSET = CUDA_IPC_OFFSET + CudaIpcDescriptor.SIZE;
    static final long ENTRY_LENGTH = PAGE_SIZE;
    static final int INLINE_CAPACITY = (int) (ENTRY_LENGTH - INLINE_BYTES_OFFSET);

    /** The whole control region: the header, then every entry. */
    static final long REGION_LENGTH = HEADER_LENGTH + ENTRY_CAPACITY * ENTRY_LENGTH;

    /** Placement: the bytes are in a data region ({@code dataSequence} or {@code dataName}). */
    static final int DATA_REGION = 0;
    /** Placement: the bytes are in the entry. */
    static final int INLINE = 1;
    /** Placement: a CUDA tensor its producer lends through CUDA IPC ({@code cudaIpc}). */
    static final int CUDA_IPC = 2;
    /** Placement flag: a CPU value its consumers copy to their CUDA device. */
    static final int TO_CUDA = 0x100;

    /** Entry state: no key. */
    static final int FREE = 0;
    /** Entry state: claimed by a producer that is still copying the value's bytes into a data region. */
    static final int RESERVED = 1;
    /** Entry state: published; consumers may take it. */
    static final int LIVE = 2;

    static {
        if (INLINE_BYTES_OFFSET >= ENTRY_LENGTH) {
            throw new ExceptionInInitializerError("an entry's fields leave no room for inline bytes in a page");
        }
    }

    private FileStoreLayout() {
    }

    /** The offset of entry {@code index} in the control region. */
    static long entryOffset(int index) {
        return HEADER_LENGTH + index * ENTRY_LENGTH;
    }

    /** The offset of rank {@code rank}'s pid. */
    static long pidOffset(int rank) {
        return PIDS_OFFSET + (long) SIZE_OF_INT * rank;
    }

    /** The offset of rank {@code rank}'s open flag. */
    static long openOffset(int rank) {
        return OPEN_OFFSET + (long) SIZE_OF_BYTE * rank;
    }

    /** The offset of dimension {@code dim}'s size in an entry's shape. */
    static long shapeOffset(int dim) {
        return SHAPE_OFFSET + (long) SIZE_OF_LONG * dim;
    }

    /** {@code offset} rounded up to a multiple of {@code alignment} (a power of two). */
    static long align(long offset, int alignment) {
        return (offset + alignment - 1) & -alignment;
    }
}
