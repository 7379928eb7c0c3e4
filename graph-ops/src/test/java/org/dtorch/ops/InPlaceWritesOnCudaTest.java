package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link InPlaceWritesTest} on a CUDA mesh: four ranks on one GPU with the same-device backend; values come back to the host
 * and are compared with torch's.
 */
@GpuTest
class InPlaceWritesOnCudaTest extends InPlaceWritesTest {

    @BeforeAll
    static void startOnCuda() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).build());
    }
}
