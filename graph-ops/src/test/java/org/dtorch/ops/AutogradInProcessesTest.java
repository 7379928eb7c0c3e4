package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.dtorch.core.distributed.DeviceMesh;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link AutogradOpsTest}'s gradient checks with every device a worker process: the backward operators cross the control
 * channel as forward operators do, and the gradients still equal libtorch's on the whole tensors. A few families, on two
 * workers and on four.
 */
@Tag("multiprocess")
@Timeout(300)
class AutogradInProcessesTest extends FourDeviceRuntime {
    private static final Set<String> CASES = Set.of("mul broadcast", "gelu", "mean keepdim", "linear", "layer_norm", "rms_norm",
        "softmax", "cross_entropy", "sdpa gqa", "embedding", "cat", "split", "slice");

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }

    @Test
    void shouldDifferentiateLikeTorchOnTwoAndFourWorkerProcesses() {
        Random random = new Random(35);
        List<String> failures = new ArrayList<>();
        int checked = 0;
        for (AutogradOpsTest.Case c : AutogradOpsTest.cases()) {
            if (!CASES.contains(c.what())) {
                continue;
            }
            for (DeviceMesh mesh : List.of(dt.mesh(0, 1), dt.initDeviceMesh(new int[] {4}))) {
                String failure = AutogradOpsTest.check(c, mesh, random);
                checked++;
                if (failure != null) {
                    failures.add(failure);
                }
            }
        }
        assertEquals(List.of(), failures);
        assertEquals(2 * CASES.size(), checked, "every chosen case ran");
    }
}
