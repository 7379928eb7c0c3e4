package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.Shm;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The entry table of a {@link FileTensorStore}'s control region ({@link FileStoreLayout}): finding a key,
 * claiming a free entry, and each entry's fields, by entry index. The protocol (what the counts mean, when an
 * entry changes state) stays in the store.
 *
 * <p>A state change is a release-write ({@link #putStateRelease}), so that a reader that acquires the
 * monitor's lock sees every field its writer filled first.
 *
 * <p>Not thread-safe: every method is called with the store's monitor lock held.
 */
final class FileStoreEntries {
    private static final int KEYS_SHOWN_IN_ERRORS = 8;

    private final MemorySegment seg;

    FileStoreEntries(MemorySegment controlRegion) {
        this.seg = controlRegion;
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

    /** The index of the entry holding {@code key}: LIVE only, or also RESERVED; -1 if none. */
    int find(byte[] keyBytes, long keyHash, boolean liveOnly) {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            int state = state(i);
            if (state == FREE || (liveOnly && state != LIVE)) {
                continue;
            }
            if (getLong(i, KEY_HASH_OFFSET) == keyHash && keyEquals(i, keyBytes)) {
                return i;
            }
        }
        return -1;
    }

    /** The index of a FREE entry; -1 if every entry is taken. */
    int freeSlot() {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            if (state(i) == FREE) {
                return i;
            }
        }
        return -1;
    }

    /** How many entries are not FREE. */
    int liveCount() {
        int n = 0;
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            if (state(i) != FREE) {
                n++;
            }
        }
        return n;
    }

    /** Frees every entry (release-writes), on reset. */
    void freeAll() {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            putStateRelease(i, FREE);
        }
    }

    /**
     * Fills the metadata of a claimed entry: counts zeroed, the value's description, its key, and where its
     * bytes are ({@code dataName} empty for none). The state is left for the caller to publish.
     */
    void fill(int index, String key, long keyHash, int getCount, int producer, ScalarType dtype, long[] shape, int placement,
              long nbytes, String dataName, long dataOffset) {
        putInt(index, GET_COUNT_OFFSET, getCount);
        putInt(index, GETS_OFFSET, 0);
        putInt(index, FINISHES_OFFSET, 0);
        putInt(index, PRODUCER_OFFSET, producer);
        putInt(index, DTYPE_OFFSET, dtype.value);
        putInt(index, NDIM_OFFSET, shape.length);
        putInt(index, PLACEMENT_OFFSET, placement);
        putLong(index, NBYTES_OFFSET, nbytes);
        putLong(index, KEY_HASH_OFFSET, keyHash);
        for (int d = 0; d < shape.length; d++) {
            putLong(index, shapeOffset(d), shape[d]);
        }
        Shm.putString(seg, entryOffset(index) + KEY_OFFSET, KEY_FIELD_LENGTH, key);
        Shm.putString(seg, entryOffset(index) + DATA_NAME_OFFSET, DATA_NAME_CAPACITY, dataName);
        putLong(index, DATA_OFFSET_OFFSET, dataOffset);
    }

    int state(int index) {
        return getInt(index, STATE_OFFSET);
    }

    /** Publishes a state: every field written before is seen by whoever reads this state. */
    void putStateRelease(int index, int state) {
        Shm.putIntRelease(seg, entryOffset(index) + STATE_OFFSET, state);
    }

    int getCount(int index) {
        return getInt(index, GET_COUNT_OFFSET);
    }

    int gets(int index) {
        return getInt(index, GETS_OFFSET);
    }

    void gets(int index, int gets) {
        putInt(index, GETS_OFFSET, gets);
    }

    int finishes(int index) {
        return getInt(index, FINISHES_OFFSET);
    }

    void finishes(int index, int finishes) {
        putInt(index, FINISHES_OFFSET, finishes);
    }

    int producer(int index) {
        return getInt(index, PRODUCER_OFFSET);
    }

    int placement(int index) {
        return getInt(index, PLACEMENT_OFFSET);
    }

    long dataSequence(int index) {
        return getLong(index, DATA_SEQUENCE_OFFSET);
    }

    void dataSequence(int index, long sequence) {
        putLong(index, DATA_SEQUENCE_OFFSET, sequence);
    }

    long dataOffset(int index) {
        return getLong(index, DATA_OFFSET_OFFSET);
    }

    /** The data region the value was allocated in; empty when it is in its producer's pooled data region. */
    String dataName(int index) {
        return Shm.getString(seg, entryOffset(index) + DATA_NAME_OFFSET);
    }

    String key(int index) {
        return Shm.getString(seg, entryOffset(index) + KEY_OFFSET);
    }

    long[] shape(int index) {
        int ndim = getInt(index, NDIM_OFFSET);
        long[] shape = new long[ndim];
        for (int d = 0; d < ndim; d++) {
            shape[d] = getLong(index, shapeOffset(d));
        }
        return shape;
    }

    /** The entry's dtype, or throws naming {@code op} if this libtorch does not know its code. */
    ScalarType dtype(String op, int index) {
        int code = getInt(index, DTYPE_OFFSET);
        ScalarType dtype = TorchTensors.ofCode(code);
        if (dtype == null) {
            throw new IllegalStateException(op + ": the entry names dtype code " + code + ", which this libtorch does not know");
        }
        return dtype;
    }

    void putCudaIpc(int index, CudaIpcDescriptor descriptor) {
        descriptor.writeTo(seg, entryOffset(index) + CUDA_IPC_OFFSET);
    }

    CudaIpcDescriptor cudaIpc(int index) {
        return CudaIpcDescriptor.readFrom(seg, entryOffset(index) + CUDA_IPC_OFFSET);
    }

    /** The entry's inline bytes, all {@link FileStoreLayout#INLINE_CAPACITY} of them. */
    MemorySegment inlineBytes(int index) {
        return seg.asSlice(entryOffset(index) + INLINE_BYTES_OFFSET, INLINE_CAPACITY);
    }

    /** "set for N consumers, G took it, F finished": an entry's counts for an error message. */
    String counts(int index) {
        int getCount = getCount(index);
        return "set for " + getCount + " consumer" + (getCount == 1 ? "" : "s") + ", " + gets(index)
            + " took it, " + finishes(index) + " finished";
    }

    /** " (live keys: 'a', 'b')", at most a few, sorted; for an error message. */
    String keysHint() {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            if (state(i) != FREE) {
                keys.add(key(i));
            }
        }
        if (keys.isEmpty()) {
            return " (no keys are live)";
        }
        keys.sort(null);
        String shown = String.join("', '", keys.subList(0, Math.min(KEYS_SHOWN_IN_ERRORS, keys.size())));
        return " (live keys: '" + shown + "'" + (keys.size() > KEYS_SHOWN_IN_ERRORS ? ", ..." : "") + ")";
    }

    /** True if entry {@code index} holds key bytes {@code key}. */
    private boolean keyEquals(int index, byte[] key) {
        long at = entryOffset(index) + KEY_OFFSET;
        if (seg.get(ValueLayout.JAVA_INT, at) != key.length) {
            return false;
        }
        return MemorySegment.mismatch(seg, at + SIZE_OF_INT, at + SIZE_OF_INT + key.length, MemorySegment.ofArray(key), 0,
            key.length) < 0;
    }

    private int getInt(int index, long field) {
        return seg.get(ValueLayout.JAVA_INT, entryOffset(index) + field);
    }

    private void putInt(int index, long field, int value) {
        seg.set(ValueLayout.JAVA_INT, entryOffset(index) + field, value);
    }

    private long getLong(int index, long field) {
        return seg.get(ValueLayout.JAVA_LONG, entryOffset(index) + field);
    }

    private void putLong(int index, long field, long value) {
        seg.set(ValueLayout.JAVA_LONG, entryOffset(index) + field, value);
    }
}
