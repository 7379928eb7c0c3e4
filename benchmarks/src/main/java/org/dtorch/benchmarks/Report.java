package org.dtorch.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The Markdown report of one run: one table per benchmark, each row a measured operation next to its
 * baseline from the same run, and the goal.
 *
 * <p>Not thread-safe: the harness thread writes it.
 */
final class Report {
    private final List<String> lines = new ArrayList<>();

    void section(String title, String description) {
        lines.add("");
        lines.add("### " + title);
        lines.add("");
        lines.add(description);
        lines.add("");
        lines.add("| case | measured p50 | measured p99 | baseline | baseline p50 | baseline p99 | ratio (baseline p50 / measured p50) | goal |");
        lines.add("|---|---|---|---|---|---|---|---|");
    }

    /** A row; the ratio is above 1 when the measured operation is faster than its baseline. */
    void row(String label, Samples measured, Samples baseline, String goal) {
        double ratio = (double) baseline.p50() / measured.p50();
        String line = String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %.2f | %s |", label,
            Samples.format(measured.p50()), Samples.format(measured.p99()), baseline.name(),
            Samples.format(baseline.p50()), Samples.format(baseline.p99()), ratio, goal);
        lines.add(line);
        System.out.println(line);
    }

    void note(String text) {
        lines.add("");
        lines.add(text);
        System.out.println(text);
    }

    void write(Path file) {
        try {
            Files.createDirectories(file.toAbsolutePath().getParent());
            Files.writeString(file, String.join("\n", lines) + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file, e);
        }
    }
}
