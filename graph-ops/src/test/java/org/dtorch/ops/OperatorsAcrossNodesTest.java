package org.dtorch.ops;

import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link OperatorsTest} on a run across two nodes of two devices each (the 4-device meshes span both nodes, the 2-device
 * ones stay on node 0): the same operators, the same answers as threads. Tagged {@code slow}: every build walks these
 * operators in threads and in worker processes ({@link OperatorsInProcessesTest}), and runs operators across nodes
 * ({@link AcrossNodesSmokeTest}, {@link AcrossNodesFaultsTest}).
 */
@Tag("multinode")
@Tag("slow")
class OperatorsAcrossNodesTest extends OperatorsTest {
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
