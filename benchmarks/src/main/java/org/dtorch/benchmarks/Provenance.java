package org.dtorch.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Where a table was measured: the commit (with a {@code -dirty} marker when the working tree differs from
 * it), the date and the machine. Every table the harnesses print states it, so a figure can be traced to
 * the code it measured.
 *
 * <p>Thread-safe: immutable.
 *
 * @param commit    the short commit hash, {@code <hash>-dirty}, or {@code unknown (...)} with the reason
 * @param date      the UTC date of the run
 * @param machine   processor, cores, operating system, Java and the environment that changes figures
 * @param shortName the machine in a few words for a table's machine column, such as {@code 2 cores (Xeon)}
 */
record Provenance(String commit, LocalDate date, String machine, String shortName) {
    /** How long one {@code git} call may take. */
    private static final long GIT_TIMEOUT_SECONDS = 10;

    /** The provenance of a run from the working tree at {@code root}. */
    static Provenance detect(Path root) {
        return new Provenance(commit(root), LocalDate.now(ZoneOffset.UTC), describeMachine(),
            shortName(cpuModel(), Runtime.getRuntime().availableProcessors()));
    }

    /** {@code 16 cores (Xeon)}: the cores and the processor's family (its brand's line, else its first word). */
    static String shortName(String cpuModel, int cores) {
        String family = null;
        for (String known : List.of("EPYC", "Xeon", "Ryzen", "Core", "Neoverse", "Graviton")) {
            if (cpuModel.contains(known)) {
                family = known;
                break;
            }
        }
        if (family == null) {
            String[] words = cpuModel.strip().split("\\s+");
            family = words.length == 0 || words[0].isEmpty() ? "unknown" : words[0];
        }
        return cores + (cores == 1 ? " core (" : " cores (") + family + ")";
    }

    /** {@code git rev-parse --short HEAD} at {@code root}, with {@code -dirty} when {@code git status} lists any change. */
    static String commit(Path root) {
        String given = System.getProperty("bench.commit");
        if (given != null && !given.isBlank()) {
            return given; // a copy without .git, such as the GPU machine's
        }
        try {
            String head = git(root, "rev-parse", "--short", "HEAD").strip();
            String status = git(root, "status", "--porcelain").strip();
            return status.isEmpty() ? head : head + "-dirty";
        } catch (IOException e) {
            return "unknown (" + e.getMessage() + ")";
        }
    }

    private static String git(Path root, String... args) throws IOException {
        List<String> command = new java.util.ArrayList<>(List.of("git", "-C", root.toString()));
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        try {
            // Read after the exit: the output of these commands is small and fits the pipe.
            if (!process.waitFor(GIT_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new IOException("git " + String.join(" ", args) + " did not finish within " + GIT_TIMEOUT_SECONDS + " s");
            }
            String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (process.exitValue() != 0) {
                throw new IOException("git " + String.join(" ", args) + " failed in " + root + ": " + out.strip());
            }
            return out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            throw new IOException("interrupted while waiting for git " + String.join(" ", args), e);
        }
    }

    private static String describeMachine() {
        String thp = Optional.ofNullable(System.getenv("THP_MEM_ALLOC_ENABLE")).orElse("(unset)");
        return cpuModel() + ", " + Runtime.getRuntime().availableProcessors() + " cores, " + System.getProperty("os.name") + " "
            + System.getProperty("os.version") + " " + System.getProperty("os.arch") + ", Java " + Runtime.version()
            + ", THP_MEM_ALLOC_ENABLE=" + thp;
    }

    private static String cpuModel() {
        try {
            return Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name"))
                .map(l -> l.substring(l.indexOf(':') + 1).strip()).findFirst().orElse("unknown processor");
        } catch (IOException e) {
            return "unknown processor";
        }
    }
}
