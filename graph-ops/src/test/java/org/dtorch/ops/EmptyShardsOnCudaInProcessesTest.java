package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link EmptyShardsOpsTest} with every device a worker JVM on one GPU: four ranks on {@code cuda:0}, the same-device
 * backend over File stores, so zero-size CUDA shards are lent between the workers (a tensor with no element is lent
 * with no memory and no IPC handle); results come back to the host and are compared with torch's. Skipped without a
 * CUDA device.
 */
@GpuTest
@Tag("multiprocess")
class EmptyShardsOnCudaInProcessesTest extends EmptyShardsOpsTest {

    @BeforeAll
    static void startProcessesOnCuda() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).perDevicePerProcess(true).build());
    }
}
