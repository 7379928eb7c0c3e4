package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link EmptyShardsOpsTest} with every device a worker process: zero-size shards cross the control channel, the File
 * stores and promises and Gloo between processes; the same answers as on one device.
 */
@Tag("multiprocess")
class EmptyShardsInProcessesTest extends EmptyShardsOpsTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
