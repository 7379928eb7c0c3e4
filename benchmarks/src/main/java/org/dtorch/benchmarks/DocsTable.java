package org.dtorch.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The tables of {@code docs/benchmarks.md}: one table per area (a {@code ## } heading), one row per figure, baseline and
 * machine, in the columns {@link #HEADER}. {@link #row} writes a comparison as such a row; {@link #update} puts rows into
 * the Markdown text, each in place of the row of the same figure, baseline and machine in the same area (or after the
 * last row of its figure, or at the table's end, when there is none), and leaves every other line as it is.
 *
 * <p>A row whose figure cell is "the same" names the figure of the row above it; a replacement keeps that form.
 *
 * <p>Thread-safe: stateless.
 */
final class DocsTable {
    static final String HEADER = "| figure | ours (p50) | baseline (p50) | ratio | goal | machine | commit, date | command |";
    static final String SEPARATOR = "|---|---|---|---|---|---|---|---|";
    /** A figure cell that repeats the figure of the row above. */
    static final String THE_SAME = "the same";

    static final String COMMUNICATION_CORE = "Communication core in one process";
    static final String ALL_REDUCE = "All-reduce, 4 ranks in threads, 64 MiB float32, SUM";
    static final String OTHER_COLLECTIVES = "Other collectives, 4 ranks in threads";
    static final String REDISTRIBUTION = "Redistribution";
    static final String PER_OPERATOR = "Per operator";
    static final String IMPLICIT = "Implicit redistribution and in-place writes";
    static final String PYTHON = "Python";
    static final String WORKER_PROCESSES = "Worker processes and shared memory";
    static final String MATRIX_PRODUCTS = "Matrix products";
    static final String CHANNELS = "Pipelines and channels";
    static final String ACROSS_HOSTS = "Across hosts (nodes on loopback)";
    static final String SAFETENSORS = "Loading state dicts (safetensors)";

    /** The area of each selection's comparisons, unless a comparison names its own ({@link Comparison#inArea}). */
    private static final Map<String, String> AREAS = Map.ofEntries(
        Map.entry("store", COMMUNICATION_CORE), Map.entry("future", COMMUNICATION_CORE),
        Map.entry("allreduce", ALL_REDUCE), Map.entry("speed", ALL_REDUCE),
        Map.entry("gloorings", OTHER_COLLECTIVES), Map.entry("gathers", OTHER_COLLECTIVES),
        Map.entry("redistribute", REDISTRIBUTION), Map.entry("ulysses", REDISTRIBUTION), Map.entry("implicit", IMPLICIT),
        Map.entry("pipeline", PER_OPERATOR), Map.entry("trace", PER_OPERATOR), Map.entry("nodes", PER_OPERATOR),
        Map.entry("python", PYTHON), Map.entry("process", WORKER_PROCESSES), Map.entry("matmul", MATRIX_PRODUCTS),
        Map.entry("channel", CHANNELS), Map.entry("stagechannel", CHANNELS),
        Map.entry("network", ACROSS_HOSTS), Map.entry("networksmall", ACROSS_HOSTS), Map.entry("rendezvous", ACROSS_HOSTS),
        Map.entry("safetensors", SAFETENSORS));

    /** A cell separator: a {@code |} that no backslash escapes. */
    private static final Pattern CELL_SEPARATOR = Pattern.compile("(?<!\\\\)\\|");
    /** A baseline cell: its name, then (after a space or a comma) its figure, such as {@code `SynchronousQueue` 0.401 us}. */
    private static final Pattern BASELINE = Pattern.compile("^(.*?),?\\s+-?[0-9][0-9.,]*(?:\\s*[A-Za-z/%]+)?$");

    private DocsTable() {
    }

    /**
     * One row of a table.
     *
     * @param area     the heading of the area, without {@code ## }
     * @param figure   what was measured (the first cell)
     * @param baseline the baseline's name, without its figure
     * @param machine  the short name of the machine
     * @param line     the whole Markdown line
     */
    record Row(String area, String figure, String baseline, String machine, String line) {
    }

    /**
     * What {@link #update} did.
     *
     * @param text     the updated Markdown
     * @param replaced rows put in place of an earlier row of the same figure, baseline and machine
     * @param added    rows that had none
     */
    record Update(String text, int replaced, int added) {
    }

    /** Every area a harness writes to. */
    static Set<String> areas() {
        return new TreeSet<>(AREAS.values());
    }

    /** The area of {@code selection}'s comparisons; null for a probe the docs keep no table for ({@code gloocopy}). */
    static String areaOf(String selection) {
        return AREAS.get(selection);
    }

    /**
     * {@code comparison} as a row of {@code area}: its label, the medians of the runs' p50s, the baseline's name and p50,
     * the median ratio, the goal's verdict, {@code machine}, the commit and date, and {@code command}.
     */
    static Row row(String area, Comparison comparison, String machine, Provenance provenance, String command) {
        String baseline = comparison.baselineName();
        String line = "| " + String.join(" | ", List.of(
            cell(comparison.label()),
            Unit.NANOS.format(comparison.measuredP50().median()),
            cell(baseline) + " " + Unit.NANOS.format(comparison.baselineP50().median()),
            Unit.RATIO.format(comparison.ratio().median()),
            cell(comparison.verdict()),
            cell(machine),
            "`" + cell(provenance.commit()) + "`, " + provenance.date(),
            cell(command))) + " |";
        return new Row(area, comparison.label(), baseline, machine, line);
    }

    /** {@link #update(String, List)} of the file {@code markdown}, written back. */
    static Update updateFile(Path markdown, List<Row> rows) {
        try {
            Update update = update(Files.readString(markdown), rows);
            Files.writeString(markdown, update.text());
            return update;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot update " + markdown, e);
        }
    }

    /**
     * {@code markdown} with {@code rows} in it: each replaces the rows of the same figure, baseline and machine in the
     * first table of its area (the first such row takes its place, any others go), or follows the last row of its figure
     * there, or ends the table; an area without a table gets one, and an absent area is added at the end.
     */
    static Update update(String markdown, List<Row> rows) {
        List<String> lines = new ArrayList<>(List.of(markdown.split("\n", -1)));
        int replaced = 0;
        int added = 0;
        for (Row row : rows) {
            if (put(lines, row)) {
                replaced++;
            } else {
                added++;
            }
        }
        return new Update(String.join("\n", lines), replaced, added);
    }

    /** Puts {@code row} into {@code lines}; true when it replaced a row. */
    private static boolean put(List<String> lines, Row row) {
        int heading = lines.indexOf("## " + row.area());
        if (heading < 0) {
            while (!lines.isEmpty() && lines.getLast().isBlank()) {
                lines.removeLast();
            }
            lines.addAll(List.of("", "## " + row.area(), "", HEADER, SEPARATOR, row.line(), ""));
            return false;
        }
        int end = heading + 1;
        while (end < lines.size() && !lines.get(end).startsWith("## ")) {
            end++;
        }
        int header = tableHeader(lines, heading, end);
        if (header < 0) {
            int at = end;
            while (at > heading + 1 && lines.get(at - 1).isBlank()) {
                at--;
            }
            lines.addAll(at, List.of("", HEADER, SEPARATOR, row.line()));
            return false;
        }
        return putInTable(lines, header + 2, row);
    }

    /** The line of the first table header ({@code | figure | ...} then {@code |---}) between two lines; -1 if none. */
    private static int tableHeader(List<String> lines, int from, int to) {
        for (int i = from + 1; i + 1 < to; i++) {
            if (lines.get(i).startsWith("| figure |") && lines.get(i + 1).startsWith("|---")) {
                return i;
            }
        }
        return -1;
    }

    /** Puts {@code row} into the table whose rows start at line {@code first}; true when it replaced a row. */
    private static boolean putInTable(List<String> lines, int first, Row row) {
        int last = first;
        while (last < lines.size() && lines.get(last).startsWith("|")) {
            last++;
        }
        int replacedAt = -1;
        int lastOfFigure = -1;
        String figure = null;
        for (int i = first; i < last; i++) {
            List<String> cells = cells(lines.get(i));
            String own = cells.isEmpty() ? "" : cells.getFirst();
            boolean same = own.equals(THE_SAME);
            figure = same && figure != null ? figure : own;
            if (!figure.equals(row.figure())) {
                continue;
            }
            lastOfFigure = i;
            if (cells.size() < 6 || !baselineName(cells.get(2)).equals(row.baseline()) || !cells.get(5).equals(row.machine())) {
                continue;
            }
            if (replacedAt < 0) {
                replacedAt = i;
                lines.set(i, same ? withFigureCell(row.line(), THE_SAME) : row.line());
            } else {
                if (!same && i + 1 < last && cells(lines.get(i + 1)).getFirst().equals(THE_SAME)) {
                    lines.set(i + 1, withFigureCell(lines.get(i + 1), cell(figure))); // it named the row that goes
                }
                lines.remove(i);
                i--;
                last--;
            }
        }
        if (replacedAt >= 0) {
            return true;
        }
        lines.add(lastOfFigure >= 0 ? lastOfFigure + 1 : last, row.line());
        return false;
    }

    /** The cells of a table row, unescaped and trimmed. */
    static List<String> cells(String line) {
        String inner = line.strip();
        inner = inner.startsWith("|") ? inner.substring(1) : inner;
        inner = inner.endsWith("|") && !inner.endsWith("\\|") ? inner.substring(0, inner.length() - 1) : inner;
        List<String> cells = new ArrayList<>();
        for (String cell : CELL_SEPARATOR.split(inner, -1)) {
            cells.add(cell.strip().replace("\\|", "|"));
        }
        return cells;
    }

    /** The baseline's name in a baseline cell: the cell less its trailing figure and unit. */
    static String baselineName(String cell) {
        Matcher m = BASELINE.matcher(cell.strip());
        return m.matches() ? m.group(1).strip() : cell.strip();
    }

    /** {@code line} with its first cell replaced by {@code text} (already escaped). */
    private static String withFigureCell(String line, String text) {
        Matcher m = CELL_SEPARATOR.matcher(line);
        if (!m.find() || !m.find()) {
            throw new IllegalArgumentException("not a table row: " + line);
        }
        return "| " + text + " " + line.substring(m.start());
    }

    private static String cell(String text) {
        return text.replace("\n", " ").replace("|", "\\|");
    }
}
