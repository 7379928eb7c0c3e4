package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Optional;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The header of a {@link FileTensorStore}'s control region ({@link FileStoreLayout}): creating the region, or
 * joining one another participant created, and the barrier's two words. The creator writes every header field,
 * then {@code magic} with a release-write; a joiner acquire-reads {@code magic} before it reads anything else,
 * and refuses a region of another size, layout version, store key or world size.
 *
 * <p>Not thread-safe: the barrier's words are read and written with the store's monitor lock held; creating
 * and joining happen once, in the store's constructor.
 */
final class FileStoreHeader {
    private final MemorySegment seg;

    FileStoreHeader(MemorySegment controlRegion) {
        this.seg = controlRegion;
    }

    /**
     * Creates the control region {@code regionName} of store {@code storeKey} and initializes its header, or opens
     * the one another participant created and waits until its creator initialized it. {@code rank} names the caller
     * in errors.
     */
    static SharedRegion createOrJoin(String regionName, String storeKey, int worldSize, int rank, Deadline deadline) {
        while (true) {
            Optional<SharedRegion> created = SharedRegion.create(regionName, REGION_LENGTH);
            if (created.isPresent()) {
                SharedRegion region = created.get();
                MemorySegment s = region.segment();
                s.set(ValueLayout.JAVA_INT, VERSION_OFFSET, VERSION);
                s.set(ValueLayout.JAVA_INT, WORLD_SIZE_OFFSET, worldSize);
                s.set(ValueLayout.JAVA_INT, ENTRY_CAPACITY_OFFSET, ENTRY_CAPACITY);
                s.set(ValueLayout.JAVA_LONG, STORE_KEY_HASH_OFFSET, FileStoreEntries.hash(FileTensorStore.utf8(storeKey)));
                Shm.putString(s, STORE_KEY_OFFSET, STORE_KEY_FIELD_LENGTH, storeKey);
                Shm.putIntRelease(s, MAGIC_OFFSET, MAGIC);
                return region;
            }
            Optional<SharedRegion> opened = SharedRegion.open(regionName);
            if (opened.isPresent()) {
                SharedRegion region = opened.get();
                try {
                    awaitInitialized(region, regionName, storeKey, rank, deadline);
                    checkCompatible(region, regionName, storeKey, worldSize);
                    return region;
                } catch (RuntimeException e) {
                    region.close();
                    throw e;
                }
            }
            if (deadline.expired()) {
                throw new CommTimeoutException("creating store '" + storeKey + "' (rank " + rank + ") " + deadline.timedOutAfter()
                    + ": shared memory " + regionName + " kept appearing and vanishing");
            }
            Thread.onSpinWait();
        }
    }

    private static void awaitInitialized(SharedRegion region, String regionName, String storeKey, int rank, Deadline deadline) {
        if (region.size() != REGION_LENGTH) {
            throw new IllegalStateException("shared memory " + regionName + " of store '" + storeKey + "' has " + region.size()
                + " bytes, not the " + REGION_LENGTH + " of this version; another program uses the name");
        }
        while (Shm.getIntAcquire(region.segment(), MAGIC_OFFSET) != MAGIC) {
            if (deadline.expired()) {
                throw new CommTimeoutException("joining store '" + storeKey + "' (rank " + rank + ") " + deadline.timedOutAfter()
                    + ": its creator never finished initializing shared memory " + regionName);
            }
            Thread.yield();
        }
    }

    private static void checkCompatible(SharedRegion region, String regionName, String storeKey, int worldSize) {
        MemorySegment s = region.segment();
        int version = s.get(ValueLayout.JAVA_INT, VERSION_OFFSET);
        String key = Shm.getString(s, STORE_KEY_OFFSET);
        if (version != VERSION || !key.equals(storeKey)) {
            throw new IllegalStateException("shared memory " + regionName + " holds store '" + key + "' (layout version " + version
                + "), not store '" + storeKey + "' (version " + VERSION + ")");
        }
        int existing = s.get(ValueLayout.JAVA_INT, WORLD_SIZE_OFFSET);
        if (existing != worldSize) {
            throw new IllegalArgumentException("store '" + storeKey + "' already exists with worldSize " + existing
                + "; this participant asked for worldSize " + worldSize);
        }
    }

    /** How many ranks arrived at the barrier of the current generation. */
    int barrierArrived() {
        return seg.get(ValueLayout.JAVA_INT, BARRIER_ARRIVED_OFFSET);
    }

    void barrierArrived(int arrived) {
        seg.set(ValueLayout.JAVA_INT, BARRIER_ARRIVED_OFFSET, arrived);
    }

    /** The barrier's generation: it advances each time every rank arrived. */
    int barrierGeneration() {
        return seg.get(ValueLayout.JAVA_INT, BARRIER_GENERATION_OFFSET);
    }

    void barrierGeneration(int generation) {
        seg.set(ValueLayout.JAVA_INT, BARRIER_GENERATION_OFFSET, generation);
    }
}
