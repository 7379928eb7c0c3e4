package org.dtorch.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(300)
class AllReduceBenchmarkTest {

    /** One quick run: 1 MiB per rank, one round; {@code measure} fails if a variant touched another's inputs. */
    private static final BenchOptions QUICK = new BenchOptions(List.of("allreduce"), Path.of("target/test-report.md"), Path.of("."), 1, 1, true, null, null);

    @Test
    void shouldGiveEachVariantItsOwnInputsAndCompareBothBackendsWithDirectGloo() throws Exception {
        AllReduceBenchmark.Rows measured = AllReduceBenchmark.measure(QUICK);
        List<Comparison> rows = measured.comparisons();

        assertEquals(List.of("Gloo through ThreadGroup, same contract", "Gloo through ThreadGroup against in place",
            "Gloo through ThreadGroup in place (`allReduceSum_`) against in place", "same-device backend"),
            rows.stream().map(Comparison::label).toList());
        assertEquals(AllReduceBenchmark.DIRECT_COPY, rows.get(0).baselineName());
        assertEquals(AllReduceBenchmark.DIRECT, rows.get(1).baselineName());
        assertEquals(AllReduceBenchmark.DIRECT, rows.get(2).baselineName());
        assertEquals(AllReduceBenchmark.DIRECT, rows.get(3).baselineName(), "the same-device backend is held to direct Gloo, not our wrapper");
        rows.forEach(row -> assertEquals(1, row.runs()));
        measured.figures().forEach(figure -> assertEquals(1, figure.runs()));
    }
}
