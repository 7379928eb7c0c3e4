package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link LocalShardsTest} with every device a worker process: each worker receives its own local tensor only
 * ({@link LocalShardSpec}'s codec), every local tensor comes back through a File promise, and both directions are
 * copies, so later writes to the caller's tensors show nowhere.
 */
@Tag("multiprocess")
class LocalShardsInProcessesTest extends LocalShardsTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }

    @Override
    boolean aliases() {
        return false;
    }

    @Override
    boolean processes() {
        return true;
    }
}
