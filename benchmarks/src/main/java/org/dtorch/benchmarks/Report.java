package org.dtorch.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Markdown report of one benchmark run: per harness a heading, the line that says where and how it was
 * measured (commit, machine, runs, command), a description, and tables whose cells are medians over the runs
 * with the range beside them. Each table is printed as it is finished and the file is rewritten, so a harness
 * that fails later loses nothing.
 *
 * <p>Each table of comparisons is followed by the same comparisons as rows of {@code docs/benchmarks.md}'s tables
 * ({@link DocsTable}), under the area each belongs to; with {@link BenchOptions#updateDocs()} they also go into that
 * file, in place of the rows of the same figure, baseline and machine.
 *
 * <p>Not thread-safe: the harness thread writes it.
 */
final class Report {
    static final String COMPARISON_HEADER = "| case | p50 | p50 range | p99 | baseline | baseline p50 | baseline p50 range | baseline p99 "
        + "| ratio | ratio range | goal |";
    static final String FIGURE_HEADER = "| measure | median | range | goal |";

    private final Provenance provenance;
    private final BenchOptions options;
    private final List<String> lines = new ArrayList<>();
    /** The selection of the current section, whose area its comparisons go to; null outside one. */
    private String selection;

    Report(Provenance provenance, BenchOptions options) {
        this.provenance = provenance;
        this.options = options;
    }

    /** A table's heading, where it was measured, and what it measures. */
    void section(String title, String selection, String description) {
        this.selection = selection;
        heading(title, options.runs() + (options.runs() == 1 ? " run" : " runs") + ": each figure is the median of the runs, each range the lowest "
            + "to the highest run, p99 the median of the runs' p99. Command: `" + options.command(selection) + "`.", description);
    }

    /** A table's heading for a harness measured once, outside Maven (the GPU machine), with the command given. */
    void sectionRunOnce(String title, String command, String description) {
        this.selection = null;
        heading(title, "One run. Command: `" + command + "`.", description);
    }

    private void heading(String title, String how, String description) {
        add("");
        add("### " + title);
        add("");
        if (options.quick()) {
            add("**Quick smoke run (`-D" + BenchOptions.QUICK_PROPERTY + "=true`): reduced sizes and iterations, not a measurement.**");
            add("");
        }
        add("Commit `" + provenance.commit() + "`, " + provenance.date() + ", " + provenance.machine() + ". " + how);
        add("");
        add(description);
    }

    /** A table of rows that each compare a measured operation with its baseline from the same runs. */
    void comparisons(List<Comparison> rows) {
        add("");
        add(COMPARISON_HEADER);
        add("|---|---|---|---|---|---|---|---|---|---|---|");
        for (Comparison row : rows) {
            add(comparisonRow(row));
        }
        docsRows(rows);
        flush();
    }

    /** The machine's name in the docs rows: {@code -Dbench.machine}, else the provenance's short name. */
    String machine() {
        return options.machine() != null ? options.machine() : provenance.shortName();
    }

    /** {@code rows} as docs rows, per area, and into {@link BenchOptions#updateDocs()} when given. */
    private void docsRows(List<Comparison> rows) {
        if (selection == null) {
            return;
        }
        String sectionArea = DocsTable.areaOf(selection);
        Map<String, List<DocsTable.Row>> byArea = new LinkedHashMap<>();
        for (Comparison row : rows) {
            String area = row.area() != null ? row.area() : sectionArea;
            if (area != null) {
                byArea.computeIfAbsent(area, a -> new ArrayList<>())
                    .add(DocsTable.row(area, row, machine(), provenance, options.docsCommand(selection)));
            }
        }
        if (byArea.isEmpty()) {
            return;
        }
        List<DocsTable.Row> all = new ArrayList<>();
        for (Map.Entry<String, List<DocsTable.Row>> area : byArea.entrySet()) {
            add("");
            add("As rows of docs/benchmarks.md, \"" + area.getKey() + "\":");
            add("");
            add(DocsTable.HEADER);
            add(DocsTable.SEPARATOR);
            area.getValue().forEach(r -> add(r.line()));
            all.addAll(area.getValue());
        }
        if (options.updateDocs() != null) {
            DocsTable.Update update = DocsTable.updateFile(options.updateDocs(), all);
            add("");
            add(options.updateDocs() + " updated: " + update.replaced() + " replaced, " + update.added() + " added.");
        }
    }

    /** A table of single figures (no baseline of their own). */
    void figures(List<Figure> rows) {
        add("");
        add(FIGURE_HEADER);
        add("|---|---|---|---|");
        for (Figure row : rows) {
            Spread s = row.spread();
            add("| " + row.label() + " | " + row.unit().format(s.median()) + " | " + row.unit().formatRange(s.min(), s.max(), s.median())
                + " | " + row.verdict() + " |");
        }
        flush();
    }

    /** A paragraph after a table. */
    void note(String text) {
        add("");
        add(text);
        flush();
    }

    static String comparisonRow(Comparison row) {
        Spread m50 = row.measuredP50();
        Spread b50 = row.baselineP50();
        Spread ratio = row.ratio();
        return "| " + row.label() + " | " + Unit.NANOS.format(m50.median()) + " | " + Unit.NANOS.formatRange(m50.min(), m50.max(), m50.median())
            + " | " + Unit.NANOS.format(row.measuredP99().median()) + " | " + row.baselineName() + " | " + Unit.NANOS.format(b50.median())
            + " | " + Unit.NANOS.formatRange(b50.min(), b50.max(), b50.median()) + " | " + Unit.NANOS.format(row.baselineP99().median())
            + " | " + Unit.RATIO.format(ratio.median()) + " | " + Unit.RATIO.formatRange(ratio.min(), ratio.max(), ratio.median()) + " | "
            + row.verdict() + " |";
    }

    private void add(String line) {
        lines.add(line);
        System.out.println(line);
    }

    private void flush() {
        Path file = options.report();
        try {
            Path parent = file.toAbsolutePath().getParent();
            Files.createDirectories(parent);
            Files.writeString(file, String.join("\n", lines) + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the benchmark report " + file, e);
        }
    }
}
