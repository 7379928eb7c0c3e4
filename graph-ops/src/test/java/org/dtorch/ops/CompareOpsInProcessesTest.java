package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link CompareOpsTest} with every device a worker process: the comparison calls cross as generic ATen calls with
 * their scalars exact, and boolean indexing crosses with its count ({@link MaskIndexSpec}'s codec).
 */
@Tag("multiprocess")
class CompareOpsInProcessesTest extends CompareOpsTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }

    @Override
    boolean processes() {
        return true;
    }
}
