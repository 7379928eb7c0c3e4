package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The view family with every device a worker process: {@link ViewOpsTest}'s walk over every operator of the family on
 * a 2x2 mesh (nested and uneven shards; the other meshes run the same code in threads), where each worker rebuilds the call by name and, for reshapes and expand, makes its own call with the sizes of its
 * shard ({@link ViewStrategy#localCall}).
 */
@Tag("multiprocess")
@Timeout(300)
class ViewOpsInProcessesTest {
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    @Test
    void shouldRunEveryViewOperatorOfTheTableLikeTorchInWorkerProcesses() {
        ViewOpsTest.walk(dt, new int[][] {{2, 2}});
    }
}
