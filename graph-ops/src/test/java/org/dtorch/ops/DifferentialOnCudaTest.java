package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.time.Duration;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.ops.difftest.Campaign;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link DifferentialTest}'s random programs on CUDA meshes, against libtorch on one GPU ({@code cuda:0}, where a CUDA
 * user runs torch; {@link org.dtorch.ops.difftest.ProgramRun}): four ranks on one GPU with the
 * same-device backend, and one rank per GPU with NCCL where two or more are visible (skipped, with the count, where
 * fewer are). Two thousand programs each. cuDNN's TF32 convolutions are turned off while the class runs, as
 * {@link GenericOpsOnCudaTest} does, since they are not float32's precision.
 */
@GpuTest
@Timeout(7200)
class DifferentialOnCudaTest {
    private static boolean tf32;

    @BeforeAll
    static void start() {
        tf32 = torch.globalContext().allowTF32CuDNN();
        torch.globalContext().setAllowTF32CuDNN(false);
    }

    @AfterAll
    static void stop() {
        torch.globalContext().setAllowTF32CuDNN(tf32);
    }

    @Test
    void randomProgramsOnFourRanksOfOneGpuMatchTorch() {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).timeout(Duration.ofSeconds(120)).build())) {
            Campaign.Report report = Campaign.run(dt, "cuda-same-device", 4, 4_000_000, 2_000);
            System.out.println(report);
            assertFalse(report.failed(), report::toString);
        }
    }

    @Test
    void randomProgramsOnOneRankPerGpuWithNcclMatchTorch() {
        int gpus = Math.min(4, Cuda.deviceCount());
        Assumptions.assumeTrue(gpus >= 2, "needs 2 GPUs, " + gpus + " visible");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:" + gpus).timeout(Duration.ofSeconds(120)).build())) {
            Campaign.Report report = Campaign.run(dt, "cuda-nccl", gpus, 5_000_000, 2_000);
            System.out.println(report);
            assertFalse(report.failed(), report::toString);
        }
    }
}
