package org.dtorch.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DocsTableTest {
    private static final Provenance PROVENANCE = new Provenance("abc1234", LocalDate.of(2026, 12, 3), "a long description",
        "2 cores (Xeon)");

    /** docs/benchmarks.md in small: two areas, rows of one figure on two machines and against two baselines. */
    private static final String DOC = String.join("\n",
        "# Benchmarks",
        "",
        "## Communication core in one process",
        "",
        "Intro text stays.",
        "",
        DocsTable.HEADER,
        DocsTable.SEPARATOR,
        "| hand-off, 1 KiB | 2.63 us | `SynchronousQueue` 0.401 us | 0.156 | p50 <= 5 us: **met** (5 of 5) | VM (Xeon) "
            + "| `cfd449a`, 2026-12-01 | `store`, 5 runs |",
        "| the same | 3.10 us | `SynchronousQueue` 0.500 us | 0.161 | p50 <= 5 us: **met** (3 of 3) | 16 cores "
            + "| `e846d24`, 2026-12-02 | `store`, 3 runs |",
        "| wake-up | 9.51 us | `CompletableFuture` 33.6 us | 3.51 | p50 <= 10 us: **met** (5 of 5) | VM (Xeon) "
            + "| `cfd449a`, 2026-12-01 | `future`, 5 runs |",
        "",
        "A note after the table stays.",
        "",
        "## Pipelines and channels",
        "",
        DocsTable.HEADER,
        DocsTable.SEPARATOR,
        "| channel, 64 MiB | 12.1 ms | FileTensorStore between two JVMs, 11.8 ms | 0.973 | (context) | VM (Xeon) "
            + "| `aebee5f`, 2026-12-02 | `channel`, 3 runs |",
        "| the same | 12.1 ms | Python `multiprocessing.shared_memory`, 59.9 ms | 4.94 | (context) | VM (Xeon) "
            + "| `aebee5f`, 2026-12-02 | `channel`, 3 runs |",
        "");

    private static Samples constant(String name, long nanos) {
        Samples samples = new Samples(name);
        for (int i = 0; i < 100; i++) {
            samples.add(nanos);
        }
        return samples;
    }

    private static Comparison comparison(String label, String baseline, long ours, long theirs) {
        Comparison c = new Comparison(label, Goal.p50AtMost(5_000));
        c.add(constant("ours", ours), constant(baseline, theirs));
        c.add(constant("ours", ours + 200), constant(baseline, theirs));
        c.add(constant("ours", ours - 200), constant(baseline, theirs));
        return c;
    }

    private static DocsTable.Row row(String area, String label, String baseline, long ours, long theirs, String machine) {
        return DocsTable.row(area, comparison(label, baseline, ours, theirs), machine, PROVENANCE, "`store`, 3 runs");
    }

    @Test
    void shouldWriteAComparisonInTheDocsColumns() {
        DocsTable.Row row = row(DocsTable.COMMUNICATION_CORE, "hand-off, 1 KiB", "`SynchronousQueue`", 2_000, 400, "VM (Xeon)");

        assertEquals("| hand-off, 1 KiB | 2.00 us | `SynchronousQueue` 0.400 us | 0.200 | p50 <= 5.00 us: **met** (3 of 3 runs) "
            + "| VM (Xeon) | `abc1234`, 2026-12-03 | `store`, 3 runs |", row.line());
        assertEquals(List.of("hand-off, 1 KiB", "2.00 us", "`SynchronousQueue` 0.400 us", "0.200",
            "p50 <= 5.00 us: **met** (3 of 3 runs)", "VM (Xeon)", "`abc1234`, 2026-12-03", "`store`, 3 runs"), DocsTable.cells(row.line()));
        assertEquals("`SynchronousQueue`", DocsTable.baselineName("`SynchronousQueue` 0.400 us"));
        assertEquals("Gloo direct, in place", DocsTable.baselineName("Gloo direct, in place, 50.5 ms"));
    }

    @Test
    void shouldEscapeAPipeInACellAndReadItBack() {
        DocsTable.Row row = row(DocsTable.COMMUNICATION_CORE, "a | b", "x|y", 2_000, 400, "VM (Xeon)");

        assertTrue(row.line().startsWith("| a \\| b | 2.00 us | x\\|y 0.400 us |"), row.line());
        assertEquals("a | b", DocsTable.cells(row.line()).getFirst());
        String once = DocsTable.update(DOC, List.of(row)).text();
        DocsTable.Update twice = DocsTable.update(once, List.of(row));
        assertEquals(1, twice.replaced());
        assertEquals(once, twice.text());
    }

    @Test
    void shouldReplaceOnlyTheRowOfTheSameFigureBaselineAndMachineInTheSameArea() {
        DocsTable.Row fresh = row(DocsTable.COMMUNICATION_CORE, "hand-off, 1 KiB", "`SynchronousQueue`", 2_000, 400, "VM (Xeon)");

        DocsTable.Update update = DocsTable.update(DOC, List.of(fresh));

        assertEquals(1, update.replaced());
        assertEquals(0, update.added());
        List<String> before = List.of(DOC.split("\n", -1));
        List<String> after = List.of(update.text().split("\n", -1));
        assertEquals(before.size(), after.size());
        int line = before.indexOf(before.stream().filter(l -> l.startsWith("| hand-off, 1 KiB |")).findFirst().orElseThrow());
        for (int i = 0; i < before.size(); i++) {
            assertEquals(i == line ? fresh.line() : before.get(i), after.get(i), "line " + (i + 1));
        }
    }

    @Test
    void shouldKeepTheSameWhenItReplacesSuchARow() {
        DocsTable.Row sixteen = row(DocsTable.COMMUNICATION_CORE, "hand-off, 1 KiB", "`SynchronousQueue`", 3_000, 500, "16 cores");

        String text = DocsTable.update(DOC, List.of(sixteen)).text();

        assertTrue(text.contains("\n| the same | 3.00 us | `SynchronousQueue` 0.500 us | 0.167 |"), text);
        assertTrue(text.contains("| 16 cores | `abc1234`, 2026-12-03 | `store`, 3 runs |\n| wake-up |"), text);
    }

    @Test
    void shouldTellTheSameFigureAgainstAnotherBaselineApart() {
        DocsTable.Row python = row(DocsTable.CHANNELS, "channel, 64 MiB", "Python `multiprocessing.shared_memory`", 2_000, 60_000,
            "VM (Xeon)");

        DocsTable.Update update = DocsTable.update(DOC, List.of(python));

        assertEquals(1, update.replaced());
        assertTrue(update.text().contains("FileTensorStore between two JVMs, 11.8 ms"), update.text());
        assertTrue(update.text().contains("\n| the same | 2.00 us | Python `multiprocessing.shared_memory` 60.0 us | 30.0 |"),
            update.text());
    }

    @Test
    void shouldAddARowAfterTheLastOfItsFigureOrAtTheEndOfTheTable() {
        DocsTable.Row newMachine = row(DocsTable.COMMUNICATION_CORE, "hand-off, 1 KiB", "`SynchronousQueue`", 2_000, 400, "H200 host");
        DocsTable.Row newFigure = row(DocsTable.COMMUNICATION_CORE, "a new figure", "`Exchanger`", 2_000, 400, "VM (Xeon)");

        DocsTable.Update update = DocsTable.update(DOC, List.of(newMachine, newFigure));

        assertEquals(0, update.replaced());
        assertEquals(2, update.added());
        List<String> lines = List.of(update.text().split("\n", -1));
        int sixteen = lines.indexOf(lines.stream().filter(l -> l.contains("| 16 cores |")).findFirst().orElseThrow());
        assertEquals(newMachine.line(), lines.get(sixteen + 1));
        assertTrue(lines.get(sixteen + 2).startsWith("| wake-up |"), lines.get(sixteen + 2));
        assertEquals(newFigure.line(), lines.get(sixteen + 3));
        assertEquals("", lines.get(sixteen + 4));
        assertEquals("A note after the table stays.", lines.get(sixteen + 5));
    }

    @Test
    void shouldAddAnAreaThatIsNotThere() {
        DocsTable.Row python = row(DocsTable.PYTHON, "enqueue", "the Java client", 7_000, 1_000, "VM (Xeon)");

        String text = DocsTable.update(DOC, List.of(python)).text();

        assertTrue(text.startsWith(DOC.strip()), text);
        assertTrue(text.endsWith("\n\n## Python\n\n" + DocsTable.HEADER + "\n" + DocsTable.SEPARATOR + "\n" + python.line() + "\n"), text);
    }

    @Test
    void shouldWriteTheRowsOfAComparisonsTableIntoTheDocsFile(@TempDir Path dir) throws IOException {
        Path docs = dir.resolve("benchmarks.md");
        Files.writeString(docs, DOC);
        BenchOptions options = new BenchOptions(List.of("store"), dir.resolve("report.md"), dir, 3, 2, false, "VM (Xeon)", docs)
            .validate();
        Report report = new Report(PROVENANCE, options);

        report.section("MemoryTensorStore hand-off", "store", "A description.");
        report.comparisons(List.of(comparison("hand-off, 1 KiB", "`SynchronousQueue`", 2_000, 400)));

        String updated = Files.readString(docs);
        assertTrue(updated.contains("\n| hand-off, 1 KiB | 2.00 us | `SynchronousQueue` 0.400 us | 0.200 | p50 <= 5.00 us: **met** (3 of 3 runs) "
            + "| VM (Xeon) | `abc1234`, 2026-12-03 | `store`, 3 runs |\n| the same | 3.10 us |"), updated);
        String written = Files.readString(options.report());
        assertTrue(written.contains("As rows of docs/benchmarks.md, \"Communication core in one process\":"), written);
        assertTrue(written.contains(docs + " updated: 1 replaced, 0 added."), written);
    }

    @Test
    void shouldRefuseToWriteTheDocsFromAQuickRun(@TempDir Path dir) throws IOException {
        Path docs = Files.writeString(dir.resolve("benchmarks.md"), DOC);
        BenchOptions quick = new BenchOptions(List.of("store"), dir.resolve("report.md"), dir, 1, 1, true, null, docs);

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, quick::validate);
        assertTrue(e.getMessage().contains(BenchOptions.UPDATE_DOCS_PROPERTY) && e.getMessage().contains(BenchOptions.QUICK_PROPERTY),
            e.getMessage());
    }

    @Test
    void shouldFindATableOfEveryAreaTheHarnessesWriteInTheRepositorysDocs() throws IOException {
        Path docs = Files.exists(Path.of("../docs/benchmarks.md")) ? Path.of("../docs/benchmarks.md") : Path.of("docs/benchmarks.md");
        List<String> lines = Files.readAllLines(docs);

        for (String area : DocsTable.areas()) {
            int heading = lines.indexOf("## " + area);
            assertTrue(heading >= 0, docs + " has no area '## " + area + "'");
            int end = heading + 1;
            while (end < lines.size() && !lines.get(end).startsWith("## ")) {
                end++;
            }
            assertTrue(lines.subList(heading, end).contains(DocsTable.HEADER), "the area '" + area + "' of " + docs
                + " has no table headed " + DocsTable.HEADER);
        }
        assertEquals(DocsTable.COMMUNICATION_CORE, DocsTable.areaOf("store"));
        assertNull(DocsTable.areaOf("gloocopy"));
    }

    @Test
    void shouldNameTheMachineByItsCoresAndProcessorFamily() {
        assertEquals("16 cores (Xeon)", Provenance.shortName("Intel(R) Xeon(R) Platinum 8480+", 16));
        assertEquals("2 cores (EPYC)", Provenance.shortName("AMD EPYC 9654 96-Core Processor", 2));
        assertEquals("1 core (unknown)", Provenance.shortName("", 1));
        assertEquals("`store`, 3 runs", new BenchOptions(List.of("store"), Path.of("r.md"), Path.of("."), 3, 2, false, null, null)
            .docsCommand("store"));
        assertEquals("`speed`, 3 runs, 2 rounds", new BenchOptions(List.of("speed"), Path.of("r.md"), Path.of("."), 3, 2, false, null, null)
            .docsCommand("speed"));
    }
}
