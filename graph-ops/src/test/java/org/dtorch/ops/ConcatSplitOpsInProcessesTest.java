package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Tensor lists with every device a worker process: {@link ConcatSplitOpsTest}'s walk over every operator of the
 * concat-split family (one round over the meshes), so {@code Tensor[]} parameters cross the control channel ({@link AtenCallCodec}'s input lists)
 * and tensor-list returns come back as one output per tensor from each worker.
 */
@Tag("multiprocess")
@Timeout(300)
class ConcatSplitOpsInProcessesTest {
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
    void shouldRunEveryOperatorOfTheFamilyLikeTorch() {
        ConcatSplitOpsTest.walk(dt, 1);
    }
}
