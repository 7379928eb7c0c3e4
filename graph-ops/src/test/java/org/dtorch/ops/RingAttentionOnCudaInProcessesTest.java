package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/** {@link RingAttentionOnCudaTest} with every rank a worker JVM on the one GPU (CUDA IPC between them). */
@GpuTest
@Tag("multiprocess")
class RingAttentionOnCudaInProcessesTest extends RingAttentionOnCudaTest {

    @BeforeAll
    static void startProcessesOnCuda() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).perDevicePerProcess(true).build());
    }
}
