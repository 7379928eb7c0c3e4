package org.dtorch.core.tensor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class BalancedSplitTest {

    @Test
    void shouldPutLargerShardsFirst() {
        assertArrayEquals(new long[] {3, 3, 2, 2}, BalancedSplit.sizes(10, 4));
        assertArrayEquals(new long[] {0, 3, 6, 8}, BalancedSplit.offsets(10, 4));
        assertEquals(3, BalancedSplit.maxSize(10, 4));
        assertFalse(BalancedSplit.isEven(10, 4));
    }

    @Test
    void shouldSplitEvenly() {
        assertArrayEquals(new long[] {2, 2, 2}, BalancedSplit.sizes(6, 3));
        assertArrayEquals(new long[] {0, 2, 4}, BalancedSplit.offsets(6, 3));
        assertTrue(BalancedSplit.isEven(6, 3));
    }

    @Test
    void shouldCoverTheDimensionWithSizesDifferingByAtMostOne() {
        for (int parts = 1; parts <= 9; parts++) {
            for (long n = 0; n <= 40; n++) {
                long[] sizes = BalancedSplit.sizes(n, parts);
                long[] offsets = BalancedSplit.offsets(n, parts);
                long total = 0;
                for (int i = 0; i < parts; i++) {
                    assertEquals(total, offsets[i]);
                    assertEquals(sizes[i], BalancedSplit.size(n, parts, i));
                    assertEquals(offsets[i], BalancedSplit.offset(n, parts, i));
                    assertTrue(sizes[i] == sizes[0] || sizes[i] == sizes[0] - 1, "sizes " + java.util.Arrays.toString(sizes));
                    total += sizes[i];
                }
                assertEquals(n, total);
            }
        }
    }

    @Test
    void shouldDifferFromTorchChunk() {
        // torch.chunk(10 over 4) gives 3, 3, 3, 1; the balanced split gives 3, 3, 2, 2.
        assertArrayEquals(new long[] {3, 3, 2, 2}, BalancedSplit.sizes(10, 4));
    }

    @Test
    void shouldGiveTheLastShardsNothingWhenTheDimensionIsShorterThanTheParts() {
        assertArrayEquals(new long[] {1, 1, 0, 0}, BalancedSplit.sizes(2, 4));
        assertArrayEquals(new long[] {0, 1, 2, 2}, BalancedSplit.offsets(2, 4));
        assertArrayEquals(new long[] {1, 1, 1, 0}, BalancedSplit.sizes(3, 4));
        assertArrayEquals(new long[] {0, 1, 2, 3}, BalancedSplit.offsets(3, 4));
        assertEquals(1, BalancedSplit.maxSize(2, 4));
        assertFalse(BalancedSplit.isEven(2, 4));
    }

    @Test
    void shouldSplitAnEmptyDimensionIntoEmptyShards() {
        assertArrayEquals(new long[] {0, 0, 0, 0}, BalancedSplit.sizes(0, 4));
        assertArrayEquals(new long[] {0, 0, 0, 0}, BalancedSplit.offsets(0, 4));
        assertEquals(0, BalancedSplit.maxSize(0, 4));
        assertTrue(BalancedSplit.isEven(0, 4));
    }

    @Test
    void shouldRejectNegativeSizesAndBadParts() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BalancedSplit.sizes(-1, 4));
        assertTrue(e.getMessage().contains("negative size -1 over 4 shards"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> BalancedSplit.sizes(5, 0));
        assertThrows(IllegalArgumentException.class, () -> BalancedSplit.size(5, 2, 2));
    }
}
