package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The blob table's map behaves as a {@link HashMap} under random puts, gets and removes, growth included. */
class LongKeyedMapTest {

    @Test
    void shouldAgreeWithHashMapUnderRandomOperations() {
        LongKeyedMap<String> ours = new LongKeyedMap<>();
        Map<Long, String> reference = new HashMap<>();
        SplittableRandom random = new SplittableRandom(42);
        for (int step = 0; step < 200_000; step++) {
            // Keys from a small window that moves, as operand ids do, plus collisions on purpose (multiples of 2^20).
            long key = random.nextInt(4) == 0 ? (long) random.nextInt(64) << 20 : step / 4 + random.nextInt(300);
            switch (random.nextInt(3)) {
                case 0 -> assertEquals(reference.put(key, "v" + step), ours.put(key, "v" + step), "put " + key);
                case 1 -> assertEquals(reference.remove(key), ours.remove(key), "remove " + key);
                default -> assertEquals(reference.get(key), ours.get(key), "get " + key);
            }
            assertEquals(reference.size(), ours.size());
        }
        for (Map.Entry<Long, String> e : reference.entrySet()) {
            assertEquals(e.getValue(), ours.get(e.getKey()));
        }
        int[] seen = {0};
        ours.forEachValue(v -> seen[0]++);
        assertEquals(reference.size(), seen[0]);
        ours.clear();
        assertNull(ours.get(reference.keySet().iterator().next()));
        assertEquals(0, ours.size());
    }
}
