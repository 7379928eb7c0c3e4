package org.dtorch.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class TensorParallelMlpTest {

    @Test
    @Timeout(120)
    void shouldMatchSingleDeviceTorch() {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            TensorParallelMlp.main(new String[0]);
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("mesh    DeviceMesh(cpu, [0, 1, 2, 3])"), out);
        assertTrue(out.contains("-> MATCH"), out);
        assertTrue(out.contains("hidden  DTensor(float32[8, 256] [S(1)]"), out);
        assertTrue(out.contains("partial DTensor(float32[8, 32] [P(sum)]"), out);
        assertTrue(out.contains("y       DTensor(float32[8, 32] [R]"), out);
    }

    @Test
    @Timeout(60)
    void shouldSayWhatIsMissingWhenAskedForCudaWhereItCannotRun() {
        assumeFalse(Cuda.isAvailable(), "CUDA is available here: TensorParallelMlpCudaTest runs the example on it");
        String message = assertThrows(CudaUnavailableException.class, () -> TensorParallelMlp.main(new String[] {"--device", "cuda"}))
            .getMessage();
        assertTrue(message.contains(Cuda.unavailableReason()), message);
    }

    @Test
    @Timeout(60)
    void shouldTakeTheDeviceTypeFromItsFlagOrProperty() {
        assertEquals("cpu", TensorParallelMlp.deviceType(new String[0]));
        assertEquals("cuda", TensorParallelMlp.deviceType(new String[] {"--device", "cuda"}));
        assertEquals("cuda", TensorParallelMlp.deviceType(new String[] {"--device=cuda"}));
        String bad = assertThrows(IllegalArgumentException.class, () -> TensorParallelMlp.deviceType(new String[] {"--device", "tpu"}))
            .getMessage();
        assertTrue(bad.contains("'tpu'") && bad.contains("cpu or cuda"), bad);
        assertThrows(IllegalArgumentException.class, () -> TensorParallelMlp.deviceType(new String[] {"--device"}));
        assertThrows(IllegalArgumentException.class, () -> TensorParallelMlp.deviceType(new String[] {"--frob"}));
        String previous = System.getProperty(TensorParallelMlp.DEVICE_PROPERTY);
        System.setProperty(TensorParallelMlp.DEVICE_PROPERTY, "cuda");
        try {
            assertEquals("cuda", TensorParallelMlp.deviceType(new String[0]));
            assertEquals("cpu", TensorParallelMlp.deviceType(new String[] {"--device", "cpu"}));
        } finally {
            if (previous == null) {
                System.clearProperty(TensorParallelMlp.DEVICE_PROPERTY);
            } else {
                System.setProperty(TensorParallelMlp.DEVICE_PROPERTY, previous);
            }
        }
    }
}
