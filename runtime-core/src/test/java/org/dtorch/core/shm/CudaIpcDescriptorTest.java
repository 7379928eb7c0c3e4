package org.dtorch.core.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** The CUDA IPC descriptor's encoding and checks, which need no GPU: round trips, bounds, garbage. */
class CudaIpcDescriptorTest {
    private static final long AT = 768;

    private static byte[] bytes(int seed) {
        byte[] b = new byte[CudaIpcDescriptor.HANDLE_BYTES];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (seed * 31 + i);
        }
        return b;
    }

    private static CudaIpcDescriptor narrowedView() {
        // A [64, 5] view of a [64, 64] float tensor at column 3, which starts 4096 bytes into a 2 MiB allocation.
        return new CudaIpcDescriptor(1, 4242, 0x7f00_0000_0000L, 2L << 20, 4096 + 3 * 4, new long[] {64, 1}, bytes(1), bytes(2));
    }

    @Test
    void shouldRoundTripThroughSharedMemoryWithoutTouchingItsNeighbours() {
        CudaIpcDescriptor written = narrowedView();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment entry = arena.allocate(4096);
            entry.fill((byte) 0x5a);
            written.writeTo(entry, AT);
            CudaIpcDescriptor read = CudaIpcDescriptor.readFrom(entry, AT);
            assertEquals(written, read);
            assertEquals(1, read.device());
            assertEquals(4242, read.producerPid());
            assertEquals(4108, read.offset());
            assertArrayEquals(new long[] {64, 1}, read.strides());
            assertArrayEquals(bytes(1), read.memHandle());
            assertArrayEquals(bytes(2), read.eventHandle());
            assertFalse(read.isEmpty());
            for (long i = 0; i < entry.byteSize(); i++) {
                if (i < AT || i >= AT + CudaIpcDescriptor.SIZE) {
                    assertEquals((byte) 0x5a, entry.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " outside the descriptor changed");
                }
            }
        }
    }

    @Test
    void shouldCarryAnEmptyTensorWithoutHandles() {
        CudaIpcDescriptor empty = CudaIpcDescriptor.empty(0, 7, new long[] {3, 1});
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(CudaIpcDescriptor.SIZE);
            empty.writeTo(s, 0);
            CudaIpcDescriptor read = CudaIpcDescriptor.readFrom(s, 0);
            assertTrue(read.isEmpty());
            assertEquals(empty, read);
            read.checkFits(new long[] {0, 3}, 4); // nothing to fit
            assertEquals(0, read.extentBytes(new long[] {0, 3}, 4));
        }
    }

    @Test
    void shouldMeasureTheBytesAViewReaches() {
        CudaIpcDescriptor d = narrowedView();
        assertEquals(((63 * 64) + 4 + 1) * 4L, d.extentBytes(new long[] {64, 5}, 4), "rows of 64, five columns");
        CudaIpcDescriptor scalar = new CudaIpcDescriptor(0, 1, 0, 512, 8, new long[0], bytes(1), bytes(2));
        assertEquals(8, scalar.extentBytes(new long[0], 8), "a 0-dim tensor is one element");
        CudaIpcDescriptor expanded = new CudaIpcDescriptor(0, 1, 0, 512, 0, new long[] {0, 1}, bytes(1), bytes(2));
        assertEquals(16, expanded.extentBytes(new long[] {1000, 4}, 4), "a broadcast dim (stride 0) reaches nothing more");
        assertThrows(IllegalArgumentException.class, () -> d.extentBytes(new long[] {64}, 4));
    }

    @Test
    void shouldRefuseAViewThatReachesPastItsAllocation() {
        CudaIpcDescriptor d = new CudaIpcDescriptor(0, 1, 0, 1024, 1000, new long[] {1}, bytes(1), bytes(2));
        d.checkFits(new long[] {6}, 4);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> d.checkFits(new long[] {7}, 4));
        assertTrue(e.getMessage().contains("reaches 1028 bytes, past its allocation's 1024"), e.getMessage());
    }

    @Test
    void shouldRejectWhatNoProducerWrites() {
        assertThrows(IllegalArgumentException.class, () -> new CudaIpcDescriptor(0, 1, 0, 1024, 0, new long[9], bytes(1), bytes(2)));
        assertThrows(IllegalArgumentException.class, () -> new CudaIpcDescriptor(0, 1, 0, 1024, 0, new long[] {1}, new byte[8], bytes(2)));
        assertThrows(IllegalArgumentException.class, () -> new CudaIpcDescriptor(0, 1, 0, 1024, 1024, new long[] {1}, bytes(1), bytes(2)));
        assertThrows(IllegalArgumentException.class, () -> new CudaIpcDescriptor(-1, 1, 0, 1024, 0, new long[] {1}, bytes(1), bytes(2)));
        assertThrows(IllegalArgumentException.class, () -> new CudaIpcDescriptor(0, 1, 0, 1024, 0, new long[] {-1}, bytes(1), bytes(2)));
    }

    @Test
    void shouldReportGarbageAsNoDescriptor() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(CudaIpcDescriptor.SIZE);
            narrowedView().writeTo(s, 0);
            s.set(ValueLayout.JAVA_INT, CudaIpcDescriptor.NDIM, 40);
            assertThrows(IllegalStateException.class, () -> CudaIpcDescriptor.readFrom(s, 0));
            narrowedView().writeTo(s, 0);
            s.set(ValueLayout.JAVA_LONG, CudaIpcDescriptor.OFFSET, 1L << 40);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> CudaIpcDescriptor.readFrom(s, 0));
            assertTrue(e.getMessage().contains("no valid CUDA IPC descriptor"), e.getMessage());
        }
    }

    @Test
    void shouldKeepItsCopiesToItself() {
        byte[] handle = bytes(3);
        long[] strides = {4, 1};
        CudaIpcDescriptor d = new CudaIpcDescriptor(0, 1, 0, 1024, 0, strides, handle, bytes(4));
        handle[0]++;
        strides[0] = 99;
        d.memHandle()[1]++;
        assertArrayEquals(bytes(3), d.memHandle());
        assertArrayEquals(new long[] {4, 1}, d.strides());
        assertTrue(CudaIpcDescriptor.END <= CudaIpcDescriptor.SIZE);
    }
}
