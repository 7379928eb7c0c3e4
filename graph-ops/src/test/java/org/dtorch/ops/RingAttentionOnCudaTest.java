package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link RingAttentionSpec} on a CUDA mesh: four ranks on one GPU with the same-device backend, the cases of
 * {@link RingAttentionSpecTest#walk} (inputs made on the host, distributed onto the GPU, results compared on the host
 * with torch's attention on the CPU).
 */
@GpuTest
@Timeout(300)
class RingAttentionOnCudaTest {
    static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    @Test
    void shouldEqualTorchsAttentionOnEveryRingOfTheGpu() {
        RingAttentionSpecTest.walk(dt);
    }
}
