package org.dtorch.ops;

import org.junit.jupiter.api.Tag;

/** {@link ShutdownTest} with every device a worker process: a worker that does not stop in time is killed. */
@Tag("multiprocess")
class ShutdownInProcessesTest extends ShutdownTest {

    @Override
    boolean processes() {
        return true;
    }
}
