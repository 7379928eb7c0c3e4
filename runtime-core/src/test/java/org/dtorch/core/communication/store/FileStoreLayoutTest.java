package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.junit.jupiter.api.Test;

/** The entry layout's CUDA IPC additions: the descriptor between the data name and the inline bytes, placements apart. */
class FileStoreLayoutTest {

    @Test
    void shouldPlaceTheCudaDescriptorBetweenTheDataNameAndTheInlineBytes() {
        assertEquals(E_DATA_NAME + DATA_NAME_CAPACITY, E_CUDA_IPC);
        assertTrue(E_CUDA_IPC + CudaIpcDescriptor.SIZE <= E_INLINE_BYTES, "the descriptor overlaps the inline bytes");
        assertTrue(E_SHAPE + 8L * MAX_DIMS <= E_KEY, "the shape overlaps the key");
        assertEquals(ENTRY_SIZE, E_INLINE_BYTES + INLINE_CAPACITY);
    }

    @Test
    void shouldTellEveryPlacementApart() {
        Set<Integer> placements = Set.of(DATA_REGION, INLINE, CUDA_IPC, DATA_REGION | TO_CUDA, INLINE | TO_CUDA);
        assertEquals(5, placements.size());
        assertEquals(0, (CUDA_IPC | INLINE | DATA_REGION) & TO_CUDA, "TO_CUDA is a flag of its own");
        assertNotEquals(INLINE, INLINE | TO_CUDA, "a CPU value for CUDA consumers never takes the plain inline path");
        assertEquals(2, VERSION, "the placement field and the CUDA descriptor are layout version 2");
    }
}
