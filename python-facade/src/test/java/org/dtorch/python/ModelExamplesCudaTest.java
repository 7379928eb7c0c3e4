package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The model examples on one GPU: four ranks sharing {@code cuda:0}, and one rank. */
@GpuTest
class ModelExamplesCudaTest {

    @Test
    @Timeout(900)
    void shouldRunTheLlamaOnFourRanksOfOneGpuAndOnOne() throws IOException {
        String four = ModelExamplesTest.run(List.of("--devices", "cuda:4", "--same-device"), "examples/python/llama.py");
        assertTrue(four.contains("DeviceMesh(cuda, [0, 1, 2, 3], dims=[tp])") && four.contains("OK: 32 generated tokens"), four);
        String one = ModelExamplesTest.run(List.of("--devices", "cuda:1"), "examples/python/llama.py");
        assertTrue(one.contains("DeviceMesh(cuda, [0], dims=[tp])") && one.contains("OK: 32 generated tokens"), one);
    }

    @Test
    @Timeout(900)
    void shouldRunTheDitOnFourRanksOfOneGpuAndOnOne() throws IOException {
        String four = ModelExamplesTest.run(List.of("--devices", "cuda:4", "--same-device"), "examples/python/dit.py");
        assertTrue(four.contains("OK: 4 steps of CFG x ulysses on (1, 2, 1, 2, 1, 1)"), four);
        String ring = ModelExamplesTest.run(List.of("--devices", "cuda:4", "--same-device"), "examples/python/dit.py", "--attention", "ring");
        assertTrue(ring.contains("OK: 4 steps of CFG x ring"), ring);
        String one = ModelExamplesTest.run(List.of("--devices", "cuda:1"), "examples/python/dit.py");
        assertTrue(one.contains("OK: 4 steps of CFG x ulysses on (1, 1, 1, 1, 1, 1)"), one);
    }
}
