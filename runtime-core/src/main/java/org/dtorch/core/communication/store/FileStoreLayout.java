package org.dtorch.core.communication.store;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.Shm;
import org.dtorch.core.shm.ShmMonitor;

/**
 * The layout of a {@link FileTensorStore}'s control region; nobody else computes these offsets.
 *
 * <pre>
 * header (4096 bytes)
 *   offset  size   field
 *   0       4      magic            written last by the creator (release); openers read it (acquire)
 *   4       4      version
 *   8       4      worldSize
 *   12      4      entryCapacity
 *   16      16     monitor          {@link ShmMonitor}: lock, change sequence, sleepers
 *   32      4      barrierArrived
 *   36      4      barrierGeneration
 *   40      8      storeKeyHash
 *   64      2048   pids[512]        the process of each rank, kept after close (the same-process check)
 *   2112    512    open[512]        1 while the rank's instance is open (one byte per rank)
 *   2624    1024   storeKey         int length + UTF-8
 * entries (entryCapacity x 4096 bytes, from offset 4096), one page each
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
 *   120     128    (unused)
 *   248     256    key              int length + UTF-8, at most {@link #MAX_KEY_BYTES}
 *   504     8      dataOffset       where the value starts in its data region
 *   512     256    dataName         the data region, when the value was allocated in shared memory already
 *                                   ({@link FileTensorStore#allocate}): int length + UTF-8; empty otherwise
 *   768     256    cudaIpc          a {@link CudaIpcDescriptor}, when placement is CUDA_IPC
 *   1024    3072   inline bytes     values of at most {@link #INLINE_CAPACITY} bytes
 * </pre>
 *
 * <p>Every field except {@code magic} and the monitor's words is read and written with the monitor's lock
 * held.
 *
 * <p>Thread-safe: stateless.
 */
final class FileStoreLayout {
    static final int MAGIC = 0x44545331; // "DTS1"
    /** 2: the placement field and the CUDA IPC descriptor (version 1 had an inline flag and a reserved device slot). */
    static final int VERSION = 2;
    static final int MAX_WORLD_SIZE = 512;
    static final int ENTRY_CAPACITY = 128;
    static final int MAX_DIMS = 8;
    static final int MAX_KEY_BYTES = 252;
    static final int MAX_STORE_KEY_BYTES = 1020;

    static final long MAGIC_OFFSET = 0;
    static final long VERSION_OFFSET = 4;
    static final long WORLD_SIZE = 8;
    static final long CAPACITY = 12;
    static final long MONITOR = 16;
    static final long BARRIER_ARRIVED = 32;
    static final long BARRIER_GENERATION = 36;
    static final long STORE_KEY_HASH = 40;
    static final long PIDS = 64;
    static final long OPEN = 2112;
    static final long STORE_KEY = 2624;
    static final long HEADER_SIZE = 4096;

    static final long ENTRY_SIZE = 4096;
    static final long E_STATE = 0;
    static final long E_GET_COUNT = 4;
    static final long E_GETS = 8;
    static final long E_FINISHES = 12;
    static final long E_PRODUCER = 16;
    static final long E_DTYPE = 20;
    static final long E_NDIM = 24;
    static final long E_PLACEMENT = 28;
    static final long E_NBYTES = 32;
    static final long E_DATA_SEQUENCE = 40;
    static final long E_KEY_HASH = 48;
    static final long E_SHAPE = 56;
    static final long E_KEY = 248;
    static final long E_DATA_OFFSET = 504;
    static final long E_DATA_NAME = 512;
    static final int DATA_NAME_CAPACITY = 256;
    static final long E_CUDA_IPC = E_DATA_NAME + DATA_NAME_CAPACITY;
    static final long E_INLINE_BYTES = 1024;
    static final int INLINE_CAPACITY = (int) (ENTRY_SIZE - E_INLINE_BYTES);

    /** Placement: the bytes are in a data region ({@code dataSequence} or {@code dataName}). */
    static final int DATA_REGION = 0;
    /** Placement: the bytes are in the entry. */
    static final int INLINE = 1;
    /** Placement: a CUDA tensor its producer lends through CUDA IPC ({@code cudaIpc}). */
    static final int CUDA_IPC = 2;
    /** Placement flag: a CPU value its consumers copy to their CUDA device. */
    static final int TO_CUDA = 0x100;

    static final int FREE = 0;
    static final int RESERVED = 1;
    static final int LIVE = 2;

    static final long REGION_SIZE = HEADER_SIZE + ENTRY_CAPACITY * ENTRY_SIZE;

    static {
        if (E_CUDA_IPC + CudaIpcDescriptor.SIZE > E_INLINE_BYTES) {
            throw new ExceptionInInitializerError("the CUDA IPC descriptor overlaps the inline bytes");
        }
    }

    private FileStoreLayout() {
    }

    static long entry(int index) {
        return HEADER_SIZE + index * ENTRY_SIZE;
    }

    static long pid(int rank) {
        return PIDS + 4L * rank;
    }

    static long open(int rank) {
        return OPEN + rank;
    }

    /** FNV-1a over the UTF-8 bytes: a quick filter before comparing keys. */
    static long hash(byte[] bytes) {
        long h = 0xcbf29ce484222325L;
        for (byte b : bytes) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        return h;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** True if the entry at {@code base} holds key bytes {@code key}. */
    static boolean keyEquals(MemorySegment s, long base, byte[] key) {
        long at = base + E_KEY;
        if (s.get(java.lang.foreign.ValueLayout.JAVA_INT, at) != key.length) {
            return false;
        }
        return MemorySegment.mismatch(s, at + 4, at + 4 + key.length, MemorySegment.ofArray(key), 0, key.length) < 0;
    }

    static String key(MemorySegment s, long base) {
        return Shm.getString(s, base + E_KEY);
    }
}
