package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The training example as a user runs it, {@code ./dtorch run examples/python/train.py}, through the launcher's main in
 * this JVM: it trains the Llama-style model under data x tensor parallelism on four devices beside the same model on one
 * device and prints {@code OK:} only when every checked step's loss equals one device's to 1e-4 relative. Every build
 * runs a few steps; the slow run trains long enough for the loss to fall.
 */
class TrainExampleTest {

    @Test
    @Timeout(600)
    void shouldTrainWithTheLossesOfOneDevice() throws IOException {
        String out = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "3");
        assertTrue(out.contains("OK: 3 steps of dp x tp training on 4 devices, the first 3 equal to one device's losses"), out);
    }

    @Test
    @Tag("slow")
    @Timeout(1200)
    void shouldLowerTheLossOverThirtySteps() throws IOException {
        String out = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "30");
        assertTrue(out.contains("OK: 30 steps of dp x tp training on 4 devices, the first 20 equal"), out);
        String ok = out.substring(out.indexOf("OK: 30 steps"));
        String[] losses = ok.substring(ok.indexOf("loss ") + 5, ok.indexOf(" in ")).split(" -> ");
        assertTrue(Double.parseDouble(losses[1]) < Double.parseDouble(losses[0]), ok);
    }
}
