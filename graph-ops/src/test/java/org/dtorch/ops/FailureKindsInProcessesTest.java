package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.junit.jupiter.api.Tag;

/** {@link FailureKindsTest} with every device a worker process: the kinds cross the control channel and the board. */
@Tag("multiprocess")
class FailureKindsInProcessesTest extends FailureKindsTest {

    @Override
    boolean processes() {
        return true;
    }

    @Override
    DTorch startForOperators() {
        return SharedWorkerProcesses.runtime();
    }
}
