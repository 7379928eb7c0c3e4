package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link OperatorsTest} on four GPUs: logical device {@code i} on {@code cuda:i}, one thread each, the
 * collectives on c10d NCCL; results come back to the host and are compared with torch's. Skipped, with the count of
 * visible GPUs, where fewer than four are visible.
 */
@GpuTest
class OperatorsOnFourGpusTest extends OperatorsTest {
    static final int GPUS = 4;

    @BeforeAll
    static void startOnFourGpus() {
        assumeFourGpus();
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:" + GPUS).build());
    }

    /** Skips the calling test class, saying how many GPUs are visible, where fewer than {@value #GPUS} are. */
    static void assumeFourGpus() {
        int visible = Cuda.deviceCount();
        Assumptions.assumeTrue(visible >= GPUS, "needs " + GPUS + " GPUs, " + visible + " visible");
    }
}
