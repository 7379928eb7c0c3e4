package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link OperatorsTest} with every device a worker JVM on one GPU: four ranks on {@code cuda:0} (the suite needs 1-,
 * 2- and 4-device meshes), the same-device backend over File stores, CUDA tensors lent between the workers through
 * CUDA IPC; results come back to the host and are compared with torch's.
 */
@GpuTest
@Tag("multiprocess")
class OperatorsOnCudaInProcessesTest extends OperatorsTest {

    @BeforeAll
    static void startProcessesOnCuda() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).perDevicePerProcess(true).build());
    }
}
