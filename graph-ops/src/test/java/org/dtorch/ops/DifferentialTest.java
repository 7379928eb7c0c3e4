package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.time.Duration;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.ops.difftest.Campaign;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Random programs ({@link org.dtorch.ops.difftest.ProgramGenerator}) on four CPU devices in threads, each against libtorch
 * on one device: every build runs a fixed set of seeds, the slow run ten thousand programs. Any seed and count run with
 * {@code -Ddtorch.difftest.seed=S -Ddtorch.difftest.count=N} (docs/testing.md).
 */
@Timeout(3600)
class DifferentialTest {
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(60)).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    @Test
    void randomProgramsInThreadsMatchTorch() {
        Campaign.Report report = Campaign.run(dt, "threads", 4, 1_000_000, 300);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }

    @Test
    @Tag("slow")
    void tenThousandRandomProgramsInThreadsMatchTorch() {
        Campaign.Report report = Campaign.run(dt, "threads", 4, 10_000_000, 10_000);
        System.out.println(report);
        assertFalse(report.failed(), report::toString);
    }
}
