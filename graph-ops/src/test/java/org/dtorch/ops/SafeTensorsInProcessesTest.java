package org.dtorch.ops;

import org.junit.jupiter.api.Tag;

/**
 * {@link SafeTensorsTest} with every device a worker process: the path travels in the operator, each worker maps its
 * own shard (its memory statistics show the bytes it mapped), and the controller's process maps nothing.
 */
@Tag("multiprocess")
class SafeTensorsInProcessesTest extends SafeTensorsTest {

    @Override
    boolean processes() {
        return true;
    }
}
