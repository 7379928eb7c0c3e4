package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Comparator;
import java.util.List;
import java.util.Set;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.ShmMonitor;
import org.junit.jupiter.api.Test;

/** The control region's layout: fields built from their sizes, apart, aligned, and where version 2 put them. */
class FileStoreLayoutTest {

    private record Field(String name, long offset, long size) {
        long end() {
            return offset + size;
        }
    }

    private static final List<Field> HEADER = List.of(
        new Field("magic", MAGIC_OFFSET, SIZE_OF_INT),
        new Field("version", VERSION_OFFSET, SIZE_OF_INT),
        new Field("worldSize", WORLD_SIZE_OFFSET, SIZE_OF_INT),
        new Field("entryCapacity", ENTRY_CAPACITY_OFFSET, SIZE_OF_INT),
        new Field("monitor", MONITOR_OFFSET, ShmMonitor.SIZE),
        new Field("barrierArrived", BARRIER_ARRIVED_OFFSET, SIZE_OF_INT),
        new Field("barrierGeneration", BARRIER_GENERATION_OFFSET, SIZE_OF_INT),
        new Field("storeKeyHash", STORE_KEY_HASH_OFFSET, SIZE_OF_LONG),
        new Field("pids", PIDS_OFFSET, (long) SIZE_OF_INT * MAX_WORLD_SIZE),
        new Field("open", OPEN_OFFSET, (long) SIZE_OF_BYTE * MAX_WORLD_SIZE),
        new Field("storeKey", STORE_KEY_OFFSET, STORE_KEY_FIELD_LENGTH));

    private static final List<Field> ENTRY = List.of(
        new Field("state", STATE_OFFSET, SIZE_OF_INT),
        new Field("getCount", GET_COUNT_OFFSET, SIZE_OF_INT),
        new Field("gets", GETS_OFFSET, SIZE_OF_INT),
        new Field("finishes", FINISHES_OFFSET, SIZE_OF_INT),
        new Field("producer", PRODUCER_OFFSET, SIZE_OF_INT),
        new Field("dtype", DTYPE_OFFSET, SIZE_OF_INT),
        new Field("ndim", NDIM_OFFSET, SIZE_OF_INT),
        new Field("placement", PLACEMENT_OFFSET, SIZE_OF_INT),
        new Field("nbytes", NBYTES_OFFSET, SIZE_OF_LONG),
        new Field("dataSequence", DATA_SEQUENCE_OFFSET, SIZE_OF_LONG),
        new Field("keyHash", KEY_HASH_OFFSET, SIZE_OF_LONG),
        new Field("shape", SHAPE_OFFSET, (long) SIZE_OF_LONG * MAX_DIMS),
        new Field("reserved", ENTRY_RESERVED_OFFSET, ENTRY_RESERVED_LENGTH),
        new Field("key", KEY_OFFSET, KEY_FIELD_LENGTH),
        new Field("dataOffset", DATA_OFFSET_OFFSET, SIZE_OF_LONG),
        new Field("dataName", DATA_NAME_OFFSET, DATA_NAME_CAPACITY),
        new Field("cudaIpc", CUDA_IPC_OFFSET, CudaIpcDescriptor.SIZE),
        new Field("inlineBytes", INLINE_BYTES_OFFSET, INLINE_CAPACITY));

    @Test
    void shouldKeepEveryHeaderFieldApartAndInsideTheHeader() {
        assertApartAndInside(HEADER, HEADER_LENGTH);
    }

    @Test
    void shouldFillAnEntryExactlyWithFieldsThatNeverOverlap() {
        assertApartAndInside(ENTRY, ENTRY_LENGTH);
        assertEquals(ENTRY_LENGTH, ENTRY.getLast().end(), "the inline bytes run to the end of the entry");
        for (int i = 1; i < ENTRY.size(); i++) {
            assertEquals(ENTRY.get(i - 1).end(), ENTRY.get(i).offset(), "an entry has no gap before " + ENTRY.get(i).name());
        }
    }

    @Test
    void shouldAlignEveryFieldToItsSizeAndTheTablesToPages() {
        for (List<Field> fields : List.of(HEADER, ENTRY)) {
            for (Field f : fields) {
                long unit = Math.min(f.size(), SIZE_OF_LONG); // a scalar's own size; a longer field's longs or length word
                assertEquals(0, f.offset() % unit, f.name() + " is misaligned");
            }
        }
        assertEquals(0, PIDS_OFFSET % CACHE_LINE_LENGTH, "the rank table starts on a cache line");
        assertEquals(0, HEADER_LENGTH % PAGE_SIZE);
        assertEquals(0, ENTRY_LENGTH % PAGE_SIZE);
        assertEquals(HEADER_LENGTH + 5 * ENTRY_LENGTH, entryOffset(5));
        assertEquals(REGION_LENGTH, entryOffset(ENTRY_CAPACITY));
        assertEquals(OPEN_OFFSET, pidOffset(MAX_WORLD_SIZE), "the pids end where the open flags start");
        assertEquals(STORE_KEY_OFFSET, openOffset(MAX_WORLD_SIZE), "the open flags end where the store key starts");
        assertEquals(ENTRY_RESERVED_OFFSET, shapeOffset(MAX_DIMS), "the shape ends where the reserved bytes start");
    }

    /** The offsets of layout version 2, as processes of an older build lay them out: a change needs a new VERSION. */
    @Test
    void shouldKeepTheOffsetsOfLayoutVersionTwo() {
        assertEquals(2, VERSION, "the placement field and the CUDA descriptor are layout version 2");
        assertEquals(List.of(0L, 4L, 8L, 12L, 16L, 32L, 36L, 40L, 64L, 2112L, 2624L),
            HEADER.stream().map(Field::offset).toList());
        assertEquals(4096, HEADER_LENGTH);
        assertEquals(List.of(0L, 4L, 8L, 12L, 16L, 20L, 24L, 28L, 32L, 40L, 48L, 56L, 120L, 248L, 504L, 512L, 768L, 1024L),
            ENTRY.stream().map(Field::offset).toList());
        assertEquals(4096, ENTRY_LENGTH);
        assertEquals(3072, INLINE_CAPACITY);
        assertEquals(4096 + 128 * 4096, REGION_LENGTH);
    }

    @Test
    void shouldTellEveryPlacementApart() {
        Set<Integer> placements = Set.of(DATA_REGION, INLINE, CUDA_IPC, DATA_REGION | TO_CUDA, INLINE | TO_CUDA);
        assertEquals(5, placements.size());
        assertEquals(0, (CUDA_IPC | INLINE | DATA_REGION) & TO_CUDA, "TO_CUDA is a flag of its own");
        assertNotEquals(INLINE, INLINE | TO_CUDA, "a CPU value for CUDA consumers never takes the plain inline path");
        assertEquals(3, Set.of(FREE, RESERVED, LIVE).size());
    }

    private static void assertApartAndInside(List<Field> fields, long length) {
        List<Field> sorted = fields.stream().sorted(Comparator.comparingLong(Field::offset)).toList();
        assertEquals(fields, sorted, "the fields are listed in offset order");
        for (int i = 0; i < sorted.size(); i++) {
            Field f = sorted.get(i);
            assertTrue(f.size() > 0, f.name() + " has no bytes");
            assertTrue(f.end() <= length, f.name() + " ends at " + f.end() + ", past " + length);
            if (i > 0) {
                Field before = sorted.get(i - 1);
                assertTrue(before.end() <= f.offset(), before.name() + " overlaps " + f.name());
            }
        }
    }
}
