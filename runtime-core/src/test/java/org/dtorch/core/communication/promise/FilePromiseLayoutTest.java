package org.dtorch.core.communication.promise;

import static org.dtorch.core.communication.promise.FilePromiseLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.dtorch.core.shm.CudaIpcDescriptor;
import org.junit.jupiter.api.Test;

/** The promise layout's CUDA IPC additions: fields in order, none overlapping, the error text shortened to fit. */
class FilePromiseLayoutTest {

    @Test
    void shouldLayTheFieldsOutWithoutOverlap() {
        long[][] fields = {
            {PLACEMENT, 4}, {WRITER_PID, 4}, {ABANDONED, 4}, {RELEASED, 4}, {FUTURE_PID, 4}, {DOORBELL, DOORBELL_CAPACITY},
            {IPC_DESCRIPTOR, CudaIpcDescriptor.SIZE}, {LENDER_BELL, DOORBELL_CAPACITY}, {ERROR, ERROR_CAPACITY},
            {INLINE_BYTES, INLINE_CAPACITY}};
        assertTrue(SHAPE + 8L * MAX_DIMS <= PLACEMENT, "the shape overlaps the placement");
        for (int i = 1; i < fields.length; i++) {
            assertTrue(fields[i - 1][0] + fields[i - 1][1] <= fields[i][0], "field " + (i - 1) + " overlaps field " + i);
        }
        assertEquals(INLINE_BYTES, ERROR + ERROR_CAPACITY, "the error text runs up to the inline bytes");
        assertEquals(REGION_SIZE, INLINE_BYTES + INLINE_CAPACITY);
        assertTrue(VALUE_REGION != INLINE && INLINE != CUDA_IPC && CUDA_IPC != VALUE_REGION);
    }
}
