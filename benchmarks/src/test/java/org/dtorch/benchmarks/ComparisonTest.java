package org.dtorch.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class ComparisonTest {

    private static Samples constant(String name, long nanos) {
        Samples samples = new Samples(name);
        for (int i = 0; i < 100; i++) {
            samples.add(nanos);
        }
        return samples;
    }

    @Test
    void shouldReportTheMedianAndRangeOfTheRunsNotTheBestRun() {
        Comparison row = new Comparison("case", Goal.ratioAtLeast(0.8));
        row.add(constant("ours", 100_000), constant("base", 90_000)); // ratio 0.90, the best run
        row.add(constant("ours", 120_000), constant("base", 90_000)); // 0.75
        row.add(constant("ours", 110_000), constant("base", 90_000)); // 0.818...

        Spread ratio = row.ratio();
        assertEquals(0.818, ratio.median(), 0.001);
        assertEquals(0.75, ratio.min(), 0.001);
        assertEquals(0.90, ratio.max(), 0.001);
        assertEquals(110_000, row.measuredP50().median(), 110);
        String line = Report.comparisonRow(row);
        assertTrue(line.contains("| 110 us | 100 to 120 us |"), line);
        assertTrue(line.contains("| 0.818 | 0.750 to 0.900 |"), line);
        assertTrue(line.endsWith("| ratio >= 0.8: **met** (2 of 3 runs) |"), line);
    }

    @Test
    void shouldJudgeTheGoalOnTheMedianAndCountTheRunsThatMetIt() {
        Comparison row = new Comparison("case", Goal.p50AtMost(5_000));
        row.add(constant("ours", 4_000), constant("base", 1_000));
        row.add(constant("ours", 6_000), constant("base", 1_000));
        row.add(constant("ours", 7_000), constant("base", 1_000));

        assertEquals("p50 <= 5.00 us: **not met** (1 of 3 runs)", row.verdict());
    }

    @Test
    void shouldTakeTheMeanOfTheTwoMiddleRunsForAnEvenCount() {
        Spread spread = Spread.of(List.of(4.0, 1.0, 3.0, 2.0));

        assertEquals(2.5, spread.median());
        assertEquals(1.0, spread.min());
        assertEquals(4.0, spread.max());
        assertEquals(4, spread.runs());
    }

    @Test
    void shouldRefuseABaselineThatChangesBetweenRuns() {
        Comparison row = new Comparison("case", Goal.ratioAtLeast(1));
        row.add(constant("ours", 1_000), constant("ProcessGroupGloo direct", 1_000));

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> row.add(constant("ours", 1_000), constant("ThreadGroup", 1_000)));
        assertTrue(e.getMessage().contains("ProcessGroupGloo direct") && e.getMessage().contains("ThreadGroup"), e.getMessage());
    }

    @Test
    void shouldRefuseNegativeSamplesAndEmptyPercentiles() {
        Samples samples = new Samples("clock");

        assertThrows(IllegalStateException.class, samples::p50);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> samples.add(-1));
        assertTrue(e.getMessage().contains("clock"), e.getMessage());
    }

    @Test
    void shouldPrintThreeSignificantDigits() {
        assertEquals("0.00213", Unit.RATIO.format(0.00213));
        assertEquals("14.2", Unit.RATIO.format(14.2));
        assertEquals("1.50 to 2.25 ms", Unit.NANOS.formatRange(1_500_000, 2_250_000, 2_000_000));
        assertEquals("5.00 us", Unit.NANOS.format(5_000));
    }
}
