package org.dtorch.python;

import org.junit.jupiter.api.Tag;

/**
 * {@link DroppedValuesMemoryTest} with every device a worker process: the workers' memory counts too. Tagged
 * {@code slow}: every build runs the Python loop in threads ({@link DroppedValuesMemoryTest}) and the dropped handles'
 * loop with worker processes from Java ({@code DroppedHandlesMemoryInProcessesTest}), whose workers free the same way.
 */
@Tag("multiprocess")
@Tag("slow")
class DroppedValuesMemoryInProcessesTest extends DroppedValuesMemoryTest {

    @Override
    boolean processes() {
        return true;
    }
}
