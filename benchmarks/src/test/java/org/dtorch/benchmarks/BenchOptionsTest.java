package org.dtorch.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class BenchOptionsTest {

    @Test
    void shouldRunEveryHarnessForAll() {
        assertEquals(BenchOptions.BENCHMARKS, BenchOptions.parseSelection("all"));
        assertEquals(List.of("store", "python"), BenchOptions.parseSelection("python, store"));
    }

    @Test
    void shouldNameAnUnknownBenchmark() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BenchOptions.parseSelection("store,allreduse"));

        assertTrue(e.getMessage().contains("allreduse") && e.getMessage().contains("allreduce"), e.getMessage());
    }

    @Test
    void shouldRefuseFewerThanOneRun() {
        BenchOptions options = new BenchOptions(List.of("store"), Path.of("r.md"), Path.of("."), 0, 6, false, null, null);

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, options::validate);
        assertTrue(e.getMessage().contains(BenchOptions.RUNS_PROPERTY), e.getMessage());
    }

    @Test
    void shouldShrinkOnlyAQuickRun() {
        BenchOptions full = new BenchOptions(List.of("store"), Path.of("r.md"), Path.of("."), 5, 6, false, null, null);
        BenchOptions quick = new BenchOptions(List.of("store"), Path.of("r.md"), Path.of("."), 2, 1, true, null, null);

        assertEquals(20_000, full.iterations(20_000));
        assertEquals(256L << 20, full.bytes(256L << 20));
        assertEquals(200, quick.iterations(20_000));
        assertEquals(10, quick.iterations(500));
        assertEquals(1L << 20, quick.bytes(256L << 20));
        assertTrue(quick.command("store").contains("-Dbench.select=store -Dbench.runs=2 -Dbench.rounds=1 -Dbench.quick=true"),
            quick.command("store"));
    }
}
