package org.dtorch.ops.difftest;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.dtorch.api.DTorch;
import org.dtorch.ops.difftest.ProgramRun.Outcome;
import org.dtorch.ops.difftest.ProgramRun.Verdict;

/**
 * A run of many random programs against one runtime: program {@code i} of a campaign of seed {@code S} is the program of
 * seed {@code S + i}, so any one of them runs again alone with count 1. Each failing program is shrunk
 * ({@link Shrinker}) and reported with its seed, the shrunk program and its Python reproduction ({@link PythonRepro}),
 * which is also written to {@code target/difftest/}.
 *
 * <p>The system properties {@value #SEED}, {@value #COUNT} and {@value #STEPS} override a test's seed, count and
 * longest program, so a documented command runs any seed and count.
 *
 * <p>Not thread-safe: one thread runs a campaign.
 */
public final class Campaign {
    /** The first seed of the campaign. */
    public static final String SEED = "dtorch.difftest.seed";
    /** The number of programs. */
    public static final String COUNT = "dtorch.difftest.count";
    /** The most operators in a program. */
    public static final String STEPS = "dtorch.difftest.steps";
    /** When true, each program's seed is printed before it runs (to find the program that crashes a JVM). */
    public static final String TRACE = "dtorch.difftest.trace";
    /** Programs of at most this many operators by default. */
    public static final int DEFAULT_STEPS = 8;
    /** Runs a shrink may make at most. */
    private static final int SHRINK_BUDGET = 300;
    /** Failures shrunk and printed in full; later ones are only counted. */
    private static final int SHRUNK = 3;

    /** A failing program: its seed, what it did, and its shrunk form with what that did and its Python script. */
    public record Failure(long seed, Outcome outcome, Program shrunk, Outcome shrunkOutcome, String python) {
        @Override
        public String toString() {
            return "seed " + seed + ": " + outcome + (shrunk == null ? "" : "\nshrunk to " + shrunkOutcome + "\n" + shrunk.describe()
                + "Python reproduction:\n" + python);
        }
    }

    /** What a campaign found. */
    public record Report(String mode, long firstSeed, int count, Map<Verdict, Integer> verdicts, List<Failure> failures, Duration time) {
        public boolean failed() {
            return !failures.isEmpty();
        }

        @Override
        public String toString() {
            return mode + ": " + count + " programs from seed " + firstSeed + " in " + time.toMillis() / 1000.0 + " s: " + verdicts
                + (failures.isEmpty() ? "" : "\n" + String.join("\n\n", failures.stream().map(Failure::toString).toList()));
        }
    }

    private Campaign() {
    }

    /** {@code name}'s system property as a long, or {@code otherwise}. */
    public static long property(String name, long otherwise) {
        String v = System.getProperty(name);
        return v == null || v.isBlank() ? otherwise : Long.parseLong(v.trim());
    }

    /**
     * Runs {@code count} programs from {@code firstSeed} (each overridable by its system property) on {@code dt}, for
     * runtimes of {@code devices} devices; {@code mode} names the runtime in the report and the reproductions' names.
     */
    public static Report run(DTorch dt, String mode, int devices, long firstSeed, int count) {
        long seed = property(SEED, firstSeed);
        int n = (int) property(COUNT, count);
        ProgramGenerator generator = new ProgramGenerator(devices, (int) property(STEPS, DEFAULT_STEPS));
        Map<Verdict, Integer> verdicts = new EnumMap<>(Verdict.class);
        List<Failure> failures = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            Program p = generator.generate(seed + i);
            if (Boolean.getBoolean(TRACE)) {
                System.out.println("difftest " + mode + " seed " + p.seed() + ": " + p.describe());
                System.out.flush();
            }
            Outcome o = ProgramRun.run(dt, p);
            verdicts.merge(o.verdict(), 1, Integer::sum);
            if (o.failed()) {
                failures.add(failures.size() < SHRUNK ? shrunk(dt, mode, p, o) : new Failure(p.seed(), o, null, null, null));
            }
        }
        return new Report(mode, seed, n, verdicts, failures, Duration.ofNanos(System.nanoTime() - start));
    }

    /** The failure of {@code p}, shrunk on {@code dt} to a program that fails with the same verdict, and its script. */
    public static Failure shrunk(DTorch dt, String mode, Program p, Outcome o) {
        Program small = Shrinker.shrink(p, c -> ProgramRun.run(dt, c).verdict() == o.verdict(), SHRINK_BUDGET);
        Outcome smallOutcome = ProgramRun.run(dt, small);
        String python = PythonRepro.print(small, dt.deviceKind().name().toLowerCase(java.util.Locale.ROOT),
            mode + " mode: " + smallOutcome);
        try {
            Path dir = Path.of("target", "difftest");
            Files.createDirectories(dir);
            Files.writeString(dir.resolve("repro-" + mode + "-" + p.seed() + ".py"), python);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new Failure(p.seed(), o, small, smallOutcome, python);
    }
}
