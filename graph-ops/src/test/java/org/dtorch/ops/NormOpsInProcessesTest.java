package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link NormOpsTest}'s walk over the normalization, softmax, batch-norm, embedding and dropout operators with every
 * device a worker process: the calls (int lists, None tensors, floats, bools) cross the control channel
 * ({@link AtenCallCodec}) and each worker takes the strategy from the {@link StrategyTable} again.
 */
@Tag("multiprocess")
@Timeout(300)
class NormOpsInProcessesTest {
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
    void shouldRunEveryOperatorOfTheseFamiliesLikeTorch() {
        NormOpsTest.walk(dt, 1);
    }
}
