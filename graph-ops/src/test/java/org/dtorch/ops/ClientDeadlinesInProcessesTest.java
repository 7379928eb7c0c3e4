package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.junit.jupiter.api.Tag;

/** {@link ClientDeadlinesTest} with every device a worker process (File futures, completed through the watcher). */
@Tag("multiprocess")
class ClientDeadlinesInProcessesTest extends ClientDeadlinesTest {

    @Override
    boolean processes() {
        return true;
    }

    @Override
    DTorch startForOperators() {
        return SharedWorkerProcesses.runtime();
    }
}
