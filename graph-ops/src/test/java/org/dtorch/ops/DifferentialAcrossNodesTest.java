package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.time.Duration;
import org.dtorch.ops.difftest.Campaign;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link DifferentialTest}'s random programs across two nodes of two CPU devices each on loopback ({@link TwoNodes}):
 * meshes that span both nodes move tensors over the network store and c10d Gloo between hosts. In the slow run only
 * (starting two nodes costs the default build more than its programs): twenty, then two thousand.
 */
@Tag("multinode")
@Tag("slow")
@Timeout(7200)
class DifferentialAcrossNodesTest {
    private static TwoNodes.Run run;

    @BeforeAll
    static void start() {
        run = TwoNodes.start(2, 2, Duration.ofSeconds(120));
    }

    @AfterAll
    static void stop() {
        if (run != null) {
            run.close();
        }
    }

    @Test
    void randomProgramsAcrossTwoNodesMatchTorch() {
        Campaign.Report report = Campaign.run(run.dt(), "nodes", 4, 3_000_000, 20);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }

    @Test
    void twoThousandRandomProgramsAcrossTwoNodesMatchTorch() {
        // Two thousand fit the CI's slow run; -Ddtorch.difftest.count=10000 runs the full campaign (docs/testing.md).
        Campaign.Report report = Campaign.run(run.dt(), "nodes", 4, 30_000_000, 2_000);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }
}
