package org.dtorch.examples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The tensor-parallel MLP example with {@code --device cuda}: four ranks on {@code cuda:0}, matching plain torch on the CPU. */
@GpuTest
class TensorParallelMlpCudaTest {

    @Test
    @Timeout(300)
    void shouldMatchSingleDeviceTorchOnFourRanksOfOneGpu() {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            TensorParallelMlp.main(new String[] {"--device", "cuda"});
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("mesh    DeviceMesh(cuda, [0, 1, 2, 3]) (every rank on cuda:0)"), out);
        assertTrue(out.contains("-> MATCH"), out);
        assertTrue(out.contains("hidden  DTensor(float32[8, 256] [S(1)]"), out);
        assertTrue(out.contains("partial DTensor(float32[8, 32] [P(sum)]"), out);
        assertTrue(out.contains("y       DTensor(float32[8, 32] [R]"), out);
    }
}
