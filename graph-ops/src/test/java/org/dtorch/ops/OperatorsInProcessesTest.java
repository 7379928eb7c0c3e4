package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/** {@link OperatorsTest} with every device a worker process: the same operators, the same answers. */
@Tag("multiprocess")
class OperatorsInProcessesTest extends OperatorsTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
