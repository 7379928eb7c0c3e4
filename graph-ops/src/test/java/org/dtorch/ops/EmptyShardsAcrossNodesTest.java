package org.dtorch.ops;

import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link EmptyShardsOpsTest} on a run across two nodes of two devices each: the empty shards of the 4-device meshes lie
 * on node 1, so the Network store and Gloo between hosts carry zero-size tensors; the same answers as on one device.
 * Tagged {@code slow}: every build runs the walk in threads and in worker processes ({@link EmptyShardsInProcessesTest}).
 */
@Tag("multinode")
@Tag("slow")
class EmptyShardsAcrossNodesTest extends EmptyShardsOpsTest {
    private static TwoNodes.Run run;

    @BeforeAll
    static void startNodes() {
        dt.close();
        run = TwoNodes.start(2, 2, Duration.ofSeconds(120));
        dt = run.dt();
    }

    /** Ends the run before the inherited close (a second close is a no-op) and checks node 1 exited cleanly. */
    @AfterAll
    static void stopNodes() {
        run.close();
    }
}
