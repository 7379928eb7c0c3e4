package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;

/**
 * The ways the Gloo backend can fill an all-reduce's result buffer, side by side in one run, so that a change of the
 * defaults rests on a measurement: each a {@code ThreadGroup.allReduce} of 64 MiB float32 over 4 ranks in threads against
 * {@code ProcessGroupGloo.allreduce} in place, measured as the {@code allreduce} harness does (ranks released
 * together, variants interleaved in rounds, rank 0's time).
 *
 * <p>A variant is {@code ring} (the default algorithm: the input read in place by a ring of sends and receives, with
 * the default segments) or {@code ring:segmentBytes}, or a copy then Gloo in place, {@code threads:firstPiece}: the
 * values of {@code dtorch.gloo.copyThreads} (0: the processors' share per rank) and {@code dtorch.gloo.overlapFirstPiece}
 * (0: no overlap; auto: a quarter when each rank has two processors or more) its groups are created with;
 * {@value #VARIANTS_PROPERTY} lists them, comma-separated (default {@value #DEFAULT_VARIANTS}). Each variant has its
 * own groups and inputs.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class GlooCopyBenchmark {
    /** System property: the variants, {@code ring}, {@code ring:segmentBytes} or {@code threads:firstPiece}, comma-separated. */
    static final String VARIANTS_PROPERTY = "bench.glooCopy";
    static final String DEFAULT_VARIANTS = "ring,1:0,0:auto";
    private static final String RING_PROPERTY = "dtorch.gloo.ring";
    private static final String SEGMENT_BYTES_PROPERTY = "dtorch.gloo.ringSegmentBytes";
    private static final String COPY_THREADS_PROPERTY = "dtorch.gloo.copyThreads";
    private static final String FIRST_PIECE_PROPERTY = "dtorch.gloo.overlapFirstPiece";
    private static final int WORLD = AllReduceBenchmark.WORLD;
    private static final long FULL_BYTES = 64L * 1024 * 1024;
    private static final int PER_ROUND = 5;

    private GlooCopyBenchmark() {
    }

    /** A way of filling the result: its row's label, and the system properties its groups are created with. */
    private record Variant(String label, Map<String, String> properties) {

        /** The ring, with its default segments or {@code segmentBytes} (empty for the default). */
        static Variant ring(String segmentBytes) {
            Map<String, String> properties = new LinkedHashMap<>();
            properties.put(RING_PROPERTY, "true");
            if (!segmentBytes.isEmpty()) {
                properties.put(SEGMENT_BYTES_PROPERTY, segmentBytes);
            }
            return new Variant("ThreadGroup (Gloo), ring" + (segmentBytes.isEmpty() ? " (the default)" : ", segments of " + segmentBytes
                + " bytes"), properties);
        }

        /** The copy then Gloo in place, with {@code threads} copy threads (0: the share) and {@code firstPiece}. */
        static Variant copy(String threads, String firstPiece) {
            boolean defaults = threads.equals("0") && firstPiece.equals("auto");
            return new Variant("ThreadGroup (Gloo), copy threads " + (threads.equals("0") ? "auto" : threads) + ", first piece "
                + (firstPiece.equals("0") ? "none" : firstPiece) + (defaults ? " (the copy's defaults)" : ""),
                Map.of(RING_PROPERTY, "false", COPY_THREADS_PROPERTY, threads, FIRST_PIECE_PROPERTY, firstPiece));
        }
    }

    /** A timed all-reduce: its untimed set-up and its body, both on every rank. */
    private record Body(RankPool.RankBody setup, RankPool.RankBody body) {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(FULL_BYTES);
        List<Variant> variants = parse(System.getProperty(VARIANTS_PROPERTY, ""));
        report.section("Gloo all-reduce: the copy into the result, " + WORLD + " ranks in threads, " + Unit.size(bytes) + " float32",
            "gloocopy", "Each row a way of filling the result buffer (`-D" + VARIANTS_PROPERTY + "=ring,threads:firstPiece,...`; "
                + "ring reads the input in place, the others copy it first; threads 0 is the processors' share, "
                + Runtime.getRuntime().availableProcessors() + " processors / " + WORLD
                + " ranks here; first piece 0 is no overlap, auto a quarter when that share is 2 or more) against "
                + "`ProcessGroupGloo.allreduce` in place; per run " + options.rounds() * PER_ROUND
                + " samples per variant, interleaved in rounds after a warm-up round.");
        long elements = bytes / Float.BYTES;
        Path directStore = Files.createTempFile("dtorch-bench-gloo", ".filestore");
        Files.delete(directStore);
        List<ProcessGroupGloo> direct = new ArrayList<>();
        List<ThreadGroupManager> managers = new ArrayList<>();
        List<Tensor> allInputs = new ArrayList<>();
        try (Scalar one = new Scalar(1f); RankPool pool = new RankPool(WORLD)) {
            direct.addAll(pool.onRanks(rank -> AllReduceBenchmark.glooGroup(directStore, rank)));
            List<Tensor> inPlace = pool.onRanks(rank -> torch.ones(elements));
            allInputs.addAll(inPlace);
            List<Body> bodies = new ArrayList<>();
            bodies.add(new Body(rank -> inPlace.get(rank).fill_(one),
                rank -> AllReduceBenchmark.allreduceInPlace(direct.get(rank), inPlace.get(rank))));
            for (Variant v : variants) {
                ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300));
                managers.add(manager);
                List<Tensor> inputs = pool.onRanks(rank -> torch.ones(elements));
                allInputs.addAll(inputs);
                bodies.add(variantBody(pool, manager, v, inputs));
            }
            report.comparisons(measure(pool, variants, bodies, options));
        } finally {
            managers.forEach(ThreadGroupManager::close);
            allInputs.forEach(Tensor::close);
            direct.forEach(ProcessGroupGloo::close);
            Files.deleteIfExists(directStore);
        }
    }

    /**
     * Creates the variant's groups with its options set (the backend reads them when a group is created), checks one
     * all-reduce untimed (the result is the sum, the input is left alone) and returns the timed body.
     */
    private static Body variantBody(RankPool pool, ThreadGroupManager manager, Variant v, List<Tensor> inputs) throws Exception {
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        Map<String, String> before = new HashMap<>();
        v.properties().forEach((name, value) -> before.put(name, System.setProperty(name, value)));
        List<ThreadGroup> groups;
        try {
            groups = pool.onRanks(rank -> manager.getThreadGroup(DeviceKind.CPU, ids, rank));
        } finally {
            before.forEach(GlooCopyBenchmark::restore);
        }
        pool.onRanks(rank -> {
            try (Tensor result = groups.get(rank).allReduce(inputs.get(rank))) {
                requireSum(result, inputs.get(rank), v);
            }
            return rank;
        });
        return new Body(rank -> { }, rank -> groups.get(rank).allReduce(inputs.get(rank)).close());
    }

    /** The runs: per run a warm-up round and then rounds of every body in turn; one row per variant against body 0. */
    private static List<Comparison> measure(RankPool pool, List<Variant> variants, List<Body> bodies, BenchOptions options)
            throws Exception {
        List<Comparison> rows = variants.stream().map(v -> new Comparison(v.label(), Goal.ratioAtLeast(0.9))).toList();
        for (int run = 0; run < options.runs(); run++) {
            List<Samples> samples = new ArrayList<>();
            samples.add(new Samples(AllReduceBenchmark.DIRECT));
            variants.forEach(v -> samples.add(new Samples(v.label())));
            for (int round = -1; round < options.rounds(); round++) {
                for (int b = 0; b < bodies.size(); b++) {
                    for (int i = 0; i < PER_ROUND; i++) {
                        long t = pool.time(bodies.get(b).setup(), bodies.get(b).body());
                        if (round >= 0) {
                            samples.get(b).add(t);
                        }
                    }
                }
            }
            for (int v = 0; v < variants.size(); v++) {
                rows.get(v).add(samples.get(v + 1), samples.getFirst());
            }
        }
        return rows;
    }

    /** Fails unless {@code result} is the sum of the ranks' ones and {@code input} still holds ones. */
    private static void requireSum(Tensor result, Tensor input, Variant v) {
        try (Tensor min = result.min(); Tensor max = result.max(); Tensor inMax = input.max(); Tensor inMin = input.min()) {
            if (min.item_float() != WORLD || max.item_float() != WORLD || inMin.item_float() != 1 || inMax.item_float() != 1) {
                throw new IllegalStateException("gloocopy benchmark, " + v.label() + ": result " + min.item_float() + " to "
                    + max.item_float() + ", input " + inMin.item_float() + " to " + inMax.item_float() + "; expected " + WORLD + " and 1");
            }
        }
    }

    private static List<Variant> parse(String text) {
        String spec = text.isBlank() ? DEFAULT_VARIANTS : text;
        return Arrays.stream(spec.split(",")).map(String::strip).filter(s -> !s.isEmpty()).map(s -> {
            String[] parts = s.split(":");
            if (parts[0].strip().equals("ring") && parts.length <= 2) {
                return Variant.ring(parts.length == 2 ? parts[1].strip() : "");
            }
            if (parts.length != 2) {
                throw new IllegalArgumentException(VARIANTS_PROPERTY + ": each variant is ring, ring:segmentBytes or threads:firstPiece, got '"
                    + s + "'");
            }
            return Variant.copy(parts[0].strip(), parts[1].strip());
        }).toList();
    }

    private static void restore(String name, String before) {
        if (before == null) {
            System.clearProperty(name);
        } else {
            System.setProperty(name, before);
        }
    }
}
