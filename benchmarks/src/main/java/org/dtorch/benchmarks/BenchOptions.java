package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * What a benchmark run does: which harnesses, how many runs and rounds, full size or a quick smoke run.
 * Read from system properties (the {@code -D} options of the Maven command, passed on by the POM) and
 * the command line ({@code CommBenchmarks <selection> <report.md>}).
 *
 * <p>Thread-safe: immutable.
 *
 * @param selected the harnesses to run, in the order of {@link #BENCHMARKS}
 * @param report   the Markdown file the tables are written to
 * @param root     the repository root (for the commit and for {@code ./dtorch})
 * @param runs     how many times each measurement is repeated; tables give the median and range of the runs
 * @param rounds   rounds per run of the harnesses that interleave their variants in rounds
 * @param quick    reduced sizes and iterations, to check that the harnesses work; not a measurement
 * @param machine    the machine's name in the docs rows ({@value #MACHINE_PROPERTY}); null for the provenance's short name
 * @param updateDocs the Markdown file whose tables get this run's rows ({@value #UPDATE_DOCS_PROPERTY}); null for none
 */
record BenchOptions(List<String> selected, Path report, Path root, int runs, int rounds, boolean quick, String machine,
                    Path updateDocs) {
    /** Every harness, in the order a run takes them. */
    static final List<String> BENCHMARKS = List.of("store", "future", "allreduce", "redistribute", "pipeline", "process", "python",
        "channel", "stagechannel");
    /**
     * Harnesses that {@code all} leaves out: {@code gpu} and {@code channelcuda} need a CUDA device and the {@code -Pgpu}
     * build ({@code channelcuda} reports itself skipped without them); {@code multigpu} needs at least two CUDA devices and
     * the {@code -Pgpu} build, and reports itself skipped with fewer; {@code speed} repeats rows of {@code allreduce},
     * {@code pipeline}, {@code future} and {@code process} (the collective-speed goals in one run); {@code gloocopy}
     * compares ways of filling the Gloo all-reduce's result buffer (a probe), and {@code gloorings} the ring's
     * reduce-scatter and all-gather with c10d's own calls; {@code matmul} takes seconds per 4096 x 4096 product on 2
     * cores, minutes per run at the default runs and rounds; {@code gathers} and {@code ulysses} measure the stacked
     * gather and Ulysses' all-to-all against their alternatives; {@code trace} repeats {@code pipeline}'s small
     * {@code add} with tracing off and on; {@code network} moves 256 MiB through
     * the Network store against Gloo's own send and receive (about a minute); {@code networksmall} compares small hand-offs
     * and promise wake-ups between two JVMs through the Network backends with the File ones, and {@code rendezvous} times
     * c10d's rendezvous of 2 and 4 node JVMs; {@code nodes} starts runs across nodes (agent JVMs) for the per-operator cost
     * against process mode and the start of a run of 2 and 4 nodes.
     */
    static final List<String> ON_REQUEST = List.of("gpu", "channelcuda", "multigpu", "speed", "gloocopy", "gloorings", "matmul", "gathers", "ulysses", "trace",
        "network", "networksmall", "rendezvous", "nodes", "implicit", "safetensors");

    /** System property: how many runs; default {@value #DEFAULT_RUNS}. */
    static final String RUNS_PROPERTY = "bench.runs";
    static final int DEFAULT_RUNS = 5;
    /** System property: rounds per run of the interleaved harnesses; default {@value #DEFAULT_ROUNDS}. */
    static final String ROUNDS_PROPERTY = "bench.rounds";
    static final int DEFAULT_ROUNDS = 6;
    /** System property: {@code true} for a quick smoke run; default false. */
    static final String QUICK_PROPERTY = "bench.quick";
    /** System property: the repository root; default the working directory. */
    static final String ROOT_PROPERTY = "bench.root";
    /** System property: the machine's short name in the docs rows, such as {@code VM (Xeon)}; default from the provenance. */
    static final String MACHINE_PROPERTY = "bench.machine";
    /**
     * System property: a Markdown file (relative to the repository root), normally {@code docs/benchmarks.md}, whose rows of
     * the same figure, baseline and machine this run's comparisons replace; default none.
     */
    static final String UPDATE_DOCS_PROPERTY = "bench.updateDocs";
    /** The harnesses that interleave their variants in {@link #rounds} rounds per run; the docs rows say how many. */
    static final Set<String> IN_ROUNDS = Set.of("allreduce", "gathers", "gloocopy", "gloorings", "implicit", "matmul", "nodes",
        "pipeline", "process", "redistribute", "rendezvous", "safetensors", "speed", "stagechannel", "trace", "ulysses");

    /** The largest tensor a quick run moves. */
    private static final long QUICK_MAX_BYTES = 1L << 20;
    /** A quick run does a hundredth of the iterations, and at least this many. */
    private static final int QUICK_MIN_ITERATIONS = 10;

    BenchOptions {
        selected = List.copyOf(selected);
    }

    /** The options of this JVM: system properties, then {@code args} (selection, report file). */
    static BenchOptions fromSystem(String[] args) {
        String selection = args.length > 0 ? args[0] : "all";
        Path report = Path.of(args.length > 1 ? args[1] : "target/benchmarks.md");
        Path root = Path.of(System.getProperty(ROOT_PROPERTY, ".")).toAbsolutePath().normalize();
        String machine = System.getProperty(MACHINE_PROPERTY, "").strip();
        String docs = System.getProperty(UPDATE_DOCS_PROPERTY, "").strip();
        return new BenchOptions(parseSelection(selection), report, root, intProperty(RUNS_PROPERTY, DEFAULT_RUNS),
            intProperty(ROUNDS_PROPERTY, DEFAULT_ROUNDS), Boolean.parseBoolean(System.getProperty(QUICK_PROPERTY, "false")),
            machine.isEmpty() ? null : machine, docs.isEmpty() ? null : root.resolve(docs)).validate();
    }

    /** {@code all} or comma-separated names from {@link #BENCHMARKS}, in that order. */
    static List<String> parseSelection(String selection) {
        List<String> names = Arrays.stream(selection.split(",")).map(String::strip).filter(s -> !s.isEmpty()).toList();
        List<String> unknown = names.stream().filter(n -> !n.equals("all") && !BENCHMARKS.contains(n) && !ON_REQUEST.contains(n)).toList();
        if (names.isEmpty() || !unknown.isEmpty()) {
            throw new IllegalArgumentException("bench.select: unknown benchmark(s) " + unknown + " in '" + selection + "'; choose 'all' or any of "
                + BENCHMARKS + " or " + ON_REQUEST);
        }
        List<String> chosen = new java.util.ArrayList<>(names.contains("all") ? BENCHMARKS : BENCHMARKS.stream().filter(names::contains).toList());
        ON_REQUEST.stream().filter(names::contains).forEach(chosen::add);
        return List.copyOf(chosen);
    }

    BenchOptions validate() {
        if (runs < 1) {
            throw new IllegalArgumentException(RUNS_PROPERTY + " must be at least 1, was " + runs);
        }
        if (rounds < 1) {
            throw new IllegalArgumentException(ROUNDS_PROPERTY + " must be at least 1, was " + rounds);
        }
        if (updateDocs != null && quick) {
            throw new IllegalArgumentException(UPDATE_DOCS_PROPERTY + " takes measurements, and a " + QUICK_PROPERTY
                + "=true run is not one: drop one of the two");
        }
        if (updateDocs != null && !Files.isRegularFile(updateDocs)) {
            throw new IllegalArgumentException(UPDATE_DOCS_PROPERTY + ": no such file " + updateDocs);
        }
        return this;
    }

    boolean selects(String name) {
        return selected.contains(name);
    }

    /** {@code full} iterations, or a hundredth of them (at least ten) in a quick run. */
    int iterations(int full) {
        return quick ? Math.max(QUICK_MIN_ITERATIONS, full / 100) : full;
    }

    /** A tensor of {@code full} bytes, or at most 1 MiB in a quick run. */
    long bytes(long full) {
        return quick ? Math.min(full, QUICK_MAX_BYTES) : full;
    }

    /** The command cell of a docs row: {@code `speed`, 3 runs, 3 rounds}. */
    String docsCommand(String selection) {
        return "`" + selection + "`, " + runs + (runs == 1 ? " run" : " runs")
            + (IN_ROUNDS.contains(selection) ? ", " + rounds + (rounds == 1 ? " round" : " rounds") : "");
    }

    /** The Maven command that reruns {@code selection} with these options. */
    String command(String selection) {
        List<String> parts = new ArrayList<>(List.of("mvn -B -q -pl benchmarks -am package exec:exec -DskipTests",
            "-Dbench.select=" + selection, "-D" + RUNS_PROPERTY + "=" + runs, "-D" + ROUNDS_PROPERTY + "=" + rounds));
        if (quick) {
            parts.add("-D" + QUICK_PROPERTY + "=true");
        }
        String glooCopy = System.getProperty(GlooCopyBenchmark.VARIANTS_PROPERTY, "");
        if (selection.contains("gloocopy") && !glooCopy.isBlank()) {
            parts.add("-D" + GlooCopyBenchmark.VARIANTS_PROPERTY + "=" + glooCopy);
        }
        String thp = System.getenv("THP_MEM_ALLOC_ENABLE");
        if (thp != null && !thp.equals("1")) {
            parts.add("-Ddtorch.env.thp=" + thp);
        }
        return String.join(" ", parts);
    }

    private static int intProperty(String name, int fallback) {
        String value = System.getProperty(name);
        if (value == null || value.isBlank()) {
            return fallback;
        }
        try {
            return Integer.parseInt(value.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a whole number, was '" + value + "'", e);
        }
    }
}
