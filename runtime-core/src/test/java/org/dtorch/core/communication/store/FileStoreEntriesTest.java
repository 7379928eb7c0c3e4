package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The entry table over a control region in plain native memory: finding keys, reading fields back, capacity. */
class FileStoreEntriesTest {
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment region = arena.allocate(REGION_LENGTH, PAGE_SIZE);
    private final FileStoreEntries entries = new FileStoreEntries(region);

    @AfterEach
    void freeRegion() {
        arena.close();
    }

    private int claim(String key, int getCount) {
        byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
        int index = entries.freeSlot();
        entries.fill(index, key, FileStoreEntries.hash(bytes), getCount, 1, ScalarType.Float, new long[] {2, 3}, INLINE, 24, "", 0);
        entries.putStateRelease(index, LIVE);
        return index;
    }

    private int find(String key, boolean liveOnly) {
        byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
        return entries.find(bytes, FileStoreEntries.hash(bytes), liveOnly);
    }

    @Test
    void shouldFindAFilledKeyAndReadBackEveryField() {
        int index = claim("w/0", 2);
        assertEquals(index, find("w/0", true));
        assertEquals(-1, find("w/1", false));
        assertEquals("w/0", entries.key(index));
        assertEquals(2, entries.getCount(index));
        assertEquals(1, entries.producer(index));
        assertEquals(INLINE, entries.placement(index));
        assertEquals(ScalarType.Float, entries.dtype("test", index));
        assertArrayEquals(new long[] {2, 3}, entries.shape(index));
        assertEquals("", entries.dataName(index));
        entries.gets(index, 1);
        assertEquals("set for 2 consumers, 1 took it, 0 finished", entries.counts(index));
        assertEquals(1, entries.liveCount());
    }

    @Test
    void shouldSeeAReservedKeyOnlyWhenAskedFor() {
        int index = claim("big", 1);
        entries.putStateRelease(index, RESERVED);
        assertEquals(-1, find("big", true), "a consumer waits until the bytes are in");
        assertEquals(index, find("big", false), "a second producer of the key is refused");
    }

    @Test
    void shouldNameTheLiveKeysAndFreeThemAll() {
        assertEquals(" (no keys are live)", entries.keysHint());
        claim("b", 1);
        claim("a", 1);
        assertEquals(" (live keys: 'a', 'b')", entries.keysHint());
        entries.freeAll();
        assertEquals(0, entries.liveCount());
        assertEquals(0, entries.freeSlot());
    }

    @Test
    void shouldRunOutOfEntriesAtTheCapacity() {
        for (int i = 0; i < ENTRY_CAPACITY; i++) {
            claim("k" + i, 1);
        }
        assertEquals(-1, entries.freeSlot());
        assertTrue(entries.keysHint().endsWith(", ...)"), "only a few keys are named");
    }
}
