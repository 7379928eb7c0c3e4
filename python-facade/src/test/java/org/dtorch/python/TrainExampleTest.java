package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The training example as a user runs it, {@code ./dtorch run examples/python/train.py}, through the launcher's main in
 * this JVM: it trains the Llama-style model under data x tensor parallelism on four devices beside the same model on one
 * device and prints {@code OK:} only when every checked step's loss equals one device's to 1e-4 relative, and a run
 * resumed from its checkpoint ({@code --save}, {@code --resume}) prints the losses of the run that never stopped. Every
 * build runs a few steps in worker processes and resumes them in threads; the slow run trains long enough for the loss
 * to fall and compares a resumed run with one that never stopped.
 */
class TrainExampleTest {

    /**
     * Every build: two steps in worker processes saved to a checkpoint, which a run in threads resumes: the checkpoint's
     * files do not depend on where the devices ran.
     */
    @Test
    @Tag("multiprocess")
    @Timeout(600)
    void shouldTrainInWorkerProcessesAndResumeInThreadsWithTheLossesOfOneDevice(@TempDir Path dir) throws IOException {
        Path checkpoint = dir.resolve("checkpoint");
        String saved = ModelExamplesTest.run(List.of("--per-device-process"), "examples/python/train.py", "--steps", "2", "--save",
            checkpoint.toString());
        assertTrue(saved.contains("OK: 2 steps of dp x tp training on 4 devices, the first 2 equal to one device's losses"), saved);
        assertTrue(saved.contains("saved a checkpoint of step 2 to "), saved);
        String resumed = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "3", "--resume", checkpoint.toString());
        assertTrue(resumed.contains("resumed from " + checkpoint + " at step 2"), resumed);
        assertTrue(resumed.contains("OK: 1 steps of dp x tp training on 4 devices"), resumed);
        assertTrue(!resumed.contains("step   1 "), "the resumed run trained step 1 again:\n" + resumed);
    }

    /** The slow run: a run resumed in threads prints, bit for bit, the step of the run that never stopped. */
    @Test
    @Tag("slow")
    @Timeout(600)
    void shouldResumeWithTheLossesOfTheUninterruptedRun(@TempDir Path dir) throws IOException {
        String out = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "3");
        assertTrue(out.contains("OK: 3 steps of dp x tp training on 4 devices, the first 3 equal to one device's losses"), out);
        Path checkpoint = dir.resolve("checkpoint");
        ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "2", "--save", checkpoint.toString());
        String resumed = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "3", "--resume", checkpoint.toString());
        assertEquals(stepLine(out, 2), stepLine(resumed, 2), "step 2 after resuming differs from the uninterrupted run's");
    }

    @Test
    @Tag("slow")
    @Tag("multiprocess")
    @Timeout(1200)
    void shouldLowerTheLossOverThirtyStepsInWorkerProcessesAndResumeThere(@TempDir Path dir) throws IOException {
        Path checkpoint = dir.resolve("checkpoint");
        String out = ModelExamplesTest.run(List.of("--per-device-process"), "examples/python/train.py", "--steps", "30",
            "--save", checkpoint.toString());
        assertTrue(out.contains("OK: 30 steps of dp x tp training on 4 devices, the first 20 equal"), out);
        String ok = out.substring(out.indexOf("OK: 30 steps"));
        String[] losses = ok.substring(ok.indexOf("loss ") + 5, ok.indexOf(" in ")).split(" -> ");
        assertTrue(Double.parseDouble(losses[1]) < Double.parseDouble(losses[0]), ok);
        String resumed = ModelExamplesTest.run(List.of("--per-device-process"), "examples/python/train.py", "--steps", "32",
            "--resume", checkpoint.toString());
        assertTrue(resumed.contains("resumed from " + checkpoint + " at step 30"), resumed);
        assertTrue(resumed.contains("OK: 2 steps of dp x tp training on 4 devices"), resumed);
    }

    /** The line that a run prints for {@code step}: its loss and one device's. */
    static String stepLine(String out, int step) {
        String prefix = String.format("step %3d  loss ", step);
        return out.lines().filter(l -> l.startsWith(prefix)).findFirst().orElseThrow(() -> new AssertionError("no " + prefix + " in\n" + out));
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
