package org.dtorch.examples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class LlamaLayerTensorParallelTest {

    @Test
    @Timeout(180)
    void shouldMatchSingleDeviceTorchWithWeightsLoadedShardByShard(@TempDir Path dir) throws Exception {
        Path weights = dir.resolve("layer.safetensors");
        LlamaLayerTensorParallel.writeRandomLayer(weights);
        assertMatches(run("--weights", weights.toString()));
    }

    @Test
    @Tag("multiprocess")
    @Tag("slow")
    @Timeout(300)
    void shouldMatchSingleDeviceTorchWithWorkerProcessesReadingTheirShards() throws Exception {
        assertMatches(run("--per-device-process"));
    }

    static String run(String... args) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            LlamaLayerTensorParallel.main(args);
        } finally {
            System.setOut(original);
        }
        return captured.toString(StandardCharsets.UTF_8);
    }

    static void assertMatches(String out) {
        assertTrue(out.contains("(9 of the layer's tensors)"), out);
        assertTrue(out.contains("wq DTensor(float32[128, 128] [S(0)]"), out);
        assertTrue(out.contains("wo DTensor(float32[128, 128] [S(1)]"), out);
        assertTrue(out.contains("-> MATCH"), out);
    }
}
