package org.dtorch.core.runtime.process;

import static org.dtorch.core.runtime.process.FailureBoardDescriptor.CAPACITY;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.HEADER_LENGTH;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.KIND_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.LENGTH;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.OPERAND_ID_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.SLOT_LENGTH;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.STATE_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.TEXT_CAPACITY;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.TEXT_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.homeSlot;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.slotOffset;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The failure board's layout is the descriptor's, and a failure keeps its kind across mappings. */
@Timeout(60)
class FailureBoardDescriptorTest {

    @Test
    void shouldLayOutTheSlotFieldsOneAfterAnotherWithinASlot() {
        assertEquals(0, STATE_OFFSET);
        assertEquals(STATE_OFFSET + Integer.BYTES, KIND_OFFSET);
        assertEquals(KIND_OFFSET + Integer.BYTES, OPERAND_ID_OFFSET);
        assertEquals(0, OPERAND_ID_OFFSET % Long.BYTES, "the operand id is 8-byte aligned");
        assertEquals(OPERAND_ID_OFFSET + Long.BYTES, TEXT_OFFSET);
        assertEquals(SLOT_LENGTH, TEXT_OFFSET + TEXT_CAPACITY);
        assertEquals(0, HEADER_LENGTH % 64, "the header fills whole cache lines");
    }

    @Test
    void shouldPlaceEverySlotInsideTheBoardWithoutOverlap() {
        assertEquals(HEADER_LENGTH, slotOffset(0));
        assertEquals(LENGTH, slotOffset(CAPACITY - 1) + SLOT_LENGTH);
        assertEquals(SLOT_LENGTH, slotOffset(1) - slotOffset(0));
        assertThrows(IndexOutOfBoundsException.class, () -> slotOffset(CAPACITY));
        for (long id : new long[] {0, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, 123_456_789}) {
            int home = homeSlot(id);
            assertTrue(home >= 0 && home < CAPACITY, "home slot " + home + " of %" + id);
        }
    }

    @Test
    void shouldKeepTheKindOfAFailureForAnotherMappingOfTheBoard() {
        String name = SharedRegion.PREFIX + ShmFiles.freshInstance("board") + "-failures";
        try (SharedFailureBoard writer = SharedFailureBoard.create(name); SharedFailureBoard reader = SharedFailureBoard.open(name)) {
            writer.fail(7, new CommTimeoutException("destGet('3') timed out after 1 s"));
            writer.fail(8, new IllegalStateException("nobody named a kind"));
            RemoteFailureException seen = assertInstanceOf(RemoteFailureException.class, reader.failure(7));
            assertEquals(FailureKind.TIMEOUT, seen.kind());
            assertTrue(seen.getMessage().contains("destGet('3')"), seen.getMessage());
            assertEquals(FailureKind.UNKNOWN, FailureKind.of(reader.failure(8)));
            reader.forget(7);
            assertNull(writer.failure(9));
            assertNull(reader.failure(7));
            assertEquals(1, reader.size());
        } finally {
            SharedRegion.unlink(name);
        }
    }
}
