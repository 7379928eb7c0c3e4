package org.dtorch.ops;

import org.junit.jupiter.api.Tag;

/** {@link DroppedHandlesMemoryTest} with every device a worker process: the workers' memory counts too. */
@Tag("multiprocess")
class DroppedHandlesMemoryInProcessesTest extends DroppedHandlesMemoryTest {

    @Override
    boolean processes() {
        return true;
    }
}
