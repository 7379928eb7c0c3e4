package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/** {@link ExactIntegersTest} with every device a worker process: the scalars cross the wire exactly. */
@Tag("multiprocess")
class ExactIntegersInProcessesTest extends ExactIntegersTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
