package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertFalse;

import org.dtorch.api.DTorch;
import org.dtorch.ops.difftest.Campaign;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link DifferentialTest}'s random programs with every device a worker process (the runtime the operator classes
 * share, {@link SharedWorkerProcesses}): every build runs a few, whose operators, moves and writes cross the control
 * channel and the File store; the slow run ten thousand.
 */
@Tag("multiprocess")
@Timeout(7200)
class DifferentialInProcessesTest {
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = SharedWorkerProcesses.runtime();
    }

    @Test
    void randomProgramsInWorkerProcessesMatchTorch() {
        Campaign.Report report = Campaign.run(dt, "processes", 4, 2_000_000, 30);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }

    @Test
    @Tag("slow")
    void twoThousandRandomProgramsInWorkerProcessesMatchTorch() {
        // Two thousand fit the CI's slow run; -Ddtorch.difftest.count=10000 runs the full campaign (docs/testing.md).
        Campaign.Report report = Campaign.run(dt, "processes", 4, 20_000_000, 2_000);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }
}
