package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link RedistributionAliasTest} with every device a worker process: the workers receive operators that read a moved
 * handle as its source's tensors under the moved placements.
 */
@Tag("multiprocess")
class RedistributionAliasInProcessesTest extends RedistributionAliasTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
