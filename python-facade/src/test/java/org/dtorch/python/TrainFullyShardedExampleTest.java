package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The training example under {@code --layout fsdp}: every layer and the root fully sharded over "dp" beside the
 * tensor-parallel plan along "tp", trained beside the same model on one device; the example prints {@code OK:} only
 * when every checked step's loss equals one device's to 1e-4 relative.
 */
@Tag("slow")
class TrainFullyShardedExampleTest {

    @Test
    @Timeout(600)
    void shouldTrainFullyShardedWithTheLossesOfOneDevice() throws IOException {
        String out = ModelExamplesTest.run(List.of(), "examples/python/train.py", "--steps", "2", "--layout", "fsdp");
        assertTrue(out.contains("fully sharded over dp: wq (Shard(dim=0), Shard(dim=0))"), out);
        assertTrue(out.contains("OK: 2 steps of fully sharded dp x tp training on 4 devices, the first 2 equal to one device's losses"), out);
    }
}
