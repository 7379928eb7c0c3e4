package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link AttentionGraphTest} with every device a worker process: each worker keeps the graph of its own attention call
 * and runs its backward.
 */
@Tag("multiprocess")
class AttentionGraphInProcessesTest extends AttentionGraphTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
