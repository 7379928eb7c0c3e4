package org.dtorch.python;

import org.junit.jupiter.api.Tag;

/** {@link DroppedValuesMemoryTest} with every device a worker process: the workers' memory counts too. */
@Tag("multiprocess")
class DroppedValuesMemoryInProcessesTest extends DroppedValuesMemoryTest {

    @Override
    boolean processes() {
        return true;
    }
}
