package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link EmptyShardsOpsTest} on a CUDA mesh: four ranks on one GPU with the same-device backend, so the zero-size shards
 * are CUDA tensors in its stores and in libtorch's CUDA kernels; results come back to the host and are compared with
 * torch's on the CPU. Skipped without a CUDA device.
 */
@GpuTest
class EmptyShardsOnCudaTest extends EmptyShardsOpsTest {

    @BeforeAll
    static void startOnCuda() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).build());
    }
}
