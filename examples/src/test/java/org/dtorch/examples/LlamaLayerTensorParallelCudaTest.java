package org.dtorch.examples;

import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Java Llama layer on four ranks sharing {@code cuda:0}: weights read from safetensors onto the GPU, shard by shard. */
@GpuTest
class LlamaLayerTensorParallelCudaTest {

    @Test
    @Timeout(300)
    void shouldMatchSingleDeviceTorchOnFourRanksOfOneGpu() throws Exception {
        LlamaLayerTensorParallelTest.assertMatches(LlamaLayerTensorParallelTest.run("--device", "cuda"));
    }
}
