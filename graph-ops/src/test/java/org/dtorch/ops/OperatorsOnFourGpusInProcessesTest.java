package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link OperatorsTest} with every device a worker JVM on its own GPU: four workers on {@code cuda:0} to
 * {@code cuda:3}, the collectives on c10d NCCL across processes, CUDA tensors lent between GPUs through CUDA IPC.
 * Skipped, with the count of visible GPUs, where fewer than four are visible.
 */
@GpuTest
@Tag("multiprocess")
class OperatorsOnFourGpusInProcessesTest extends OperatorsTest {

    @BeforeAll
    static void startProcessesOnFourGpus() {
        OperatorsOnFourGpusTest.assumeFourGpus();
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:" + OperatorsOnFourGpusTest.GPUS).perDevicePerProcess(true).build());
    }
}
