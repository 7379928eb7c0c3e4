package org.dtorch.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.FileStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;

/**
 * All-reduce (SUM) of 64 MiB float32 over 4 ranks in threads. Both of our backends are measured against
 * the strongest baseline, {@code ProcessGroupGloo.allreduce} called directly on the input (in place, no
 * copy): {@code ThreadGroup.allReduce} on Gloo, and the same-device backend. A context row compares the
 * Gloo wrapper with Gloo called directly on a fresh copy of the input, the contract of {@code ThreadGroup}
 * (the input is left alone), to separate the cost of that contract from the wrapper's own; and another row compares
 * {@code ThreadGroup.allReduceSum_}, which sums in place as the baseline does, with the baseline itself.
 *
 * <p>Every variant owns its inputs. The in-place variants' inputs are refilled with ones before each
 * sample, outside the timed part, so it always reduces the same values; afterwards its result and the
 * untouched inputs of the other variants are checked. Variants are interleaved in rounds so drift of a
 * noisy machine hits all alike; each sample is rank 0's time from a common start to its result.
 */
final class AllReduceBenchmark {
    static final int WORLD = 4;
    static final String DIRECT = "ProcessGroupGloo direct, in place";
    static final String DIRECT_COPY = "ProcessGroupGloo direct on a copy";
    static final String GLOO = "ThreadGroup (Gloo)";
    static final String SAME_DEVICE = "ThreadGroup (same-device backend)";
    static final String MEMCPY = "single-thread memcpy, rank 0";
    static final String GLOO_IN_PLACE = "ThreadGroup (Gloo), in place: allReduceSum_";
    private static final long FULL_BYTES = 64L * 1024 * 1024;
    private static final int PER_ROUND = 5;

    private AllReduceBenchmark() {
    }

    /** A variant: its name, its own inputs (one per rank), an untimed preparation and the timed all-reduce. */
    private record Variant(String name, List<Tensor> inputs, RankPool.RankBody setup, RankPool.RankBody body, float expected) {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(FULL_BYTES);
        boolean hugePages = !"0".equals(System.getenv("THP_MEM_ALLOC_ENABLE"));
        report.section("All-reduce, 4 ranks in threads, " + Unit.size(bytes) + " float32, SUM"
            + (hugePages ? "" : ", without transparent huge pages"), "allreduce",
            "Rank 0's time per all-reduce, ranks released together by a barrier; per run " + options.rounds() * PER_ROUND + " samples per "
                + "variant, interleaved in rounds, after a warm-up round. Each variant has its own inputs. `ThreadGroup.allReduce` returns a "
                + "new tensor and leaves its input alone; the baseline calls `ProcessGroupGloo.allreduce` on its input itself (inputs "
                + "refilled before each sample, untimed); \"direct on a copy\" clones the input first (the contract of `ThreadGroup`).");
        Rows rows = measure(options);
        report.comparisons(rows.comparisons());
        report.note("Memory bandwidth of the same-device all-reduce, counting every input read once and every output written once ("
            + "2 x " + WORLD + " x " + Unit.size(bytes) + " per all-reduce), against one thread copying " + Unit.size(bytes)
            + " (read once, written once) in the same rounds:");
        report.figures(rows.figures());
    }

    /** The rows of the table and the bandwidth figures of the same-device backend against a single-thread memcpy. */
    record Rows(List<Comparison> comparisons, List<Figure> figures) {
    }

    /** The rows of the table; fails if a variant disturbed another's inputs or reduced to a wrong result. */
    static Rows measure(BenchOptions options) throws Exception {
        long bytes = options.bytes(FULL_BYTES);
        long elements = bytes / Float.BYTES;
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        Path directStore = Files.createTempFile("dtorch-bench-gloo", ".filestore");
        Files.delete(directStore);
        Comparison glooRow = new Comparison("Gloo through ThreadGroup, same contract", Goal.ratioAtLeast(0.95));
        Comparison inPlaceRow = new Comparison("Gloo through ThreadGroup against in place", Goal.ratioAtLeast(0.9));
        Comparison inPlaceApiRow = new Comparison("Gloo through ThreadGroup in place (`allReduceSum_`) against in place",
            Goal.ratioAtLeast(0.9));
        Comparison sameRow = new Comparison("same-device backend", Goal.ratioAtLeast(3));
        Figure sameBandwidth = new Figure("same-device all-reduce, GB/s moved (p50 of the run)", Unit.GIGABYTES_PER_SECOND, Goal.context("measured"));
        Figure copyBandwidth = new Figure("single-thread memcpy, GB/s moved (p50 of the run)", Unit.GIGABYTES_PER_SECOND, Goal.context("baseline"));
        Figure bandwidthRatio = new Figure("same-device over memcpy bandwidth", Unit.RATIO,
            new Goal("at least 1 (memory-bandwidth bound)", Goal.Target.VALUE, r -> r >= 1));
        List<ProcessGroupGloo> direct = new ArrayList<>();
        List<Variant> variants = new ArrayList<>();
        try (Arena arena = Arena.ofShared(); Scalar one = new Scalar(1f);
             RankPool pool = new RankPool(WORLD);
             ThreadGroupManager gloo = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300));
             ThreadGroupManager same = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            direct.addAll(pool.onRanks(rank -> glooGroup(directStore, rank)));
            List<ThreadGroup> glooGroups = pool.onRanks(rank -> gloo.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<ThreadGroup> sameGroups = pool.onRanks(rank -> same.getThreadGroup(DeviceKind.CPU, ids, rank));

            List<Tensor> inPlace = ones(pool, elements);
            variants.add(new Variant(DIRECT, inPlace, rank -> inPlace.get(rank).fill_(one),
                rank -> allreduceInPlace(direct.get(rank), inPlace.get(rank)), WORLD));
            List<Tensor> copied = ones(pool, elements);
            variants.add(new Variant(DIRECT_COPY, copied, rank -> { }, rank -> {
                try (Tensor copy = copied.get(rank).clone()) {
                    allreduceInPlace(direct.get(rank), copy);
                }
            }, 1));
            List<Tensor> glooInputs = ones(pool, elements);
            variants.add(new Variant(GLOO, glooInputs, rank -> { }, rank -> glooGroups.get(rank).allReduce(glooInputs.get(rank)).close(), 1));
            List<Tensor> sameInputs = ones(pool, elements);
            variants.add(new Variant(SAME_DEVICE, sameInputs, rank -> { },
                rank -> sameGroups.get(rank).allReduce(sameInputs.get(rank)).close(), 1));
            List<Tensor> copyFrom = ones(pool, elements);
            MemorySegment copyTo = arena.allocate(bytes, 64);
            variants.add(new Variant(MEMCPY, copyFrom, rank -> { }, rank -> {
                if (rank == 0) {
                    MemorySegment.copy(MemorySegment.ofAddress(copyFrom.getFirst().data_ptr().address()).reinterpret(bytes), 0, copyTo, 0, bytes);
                }
            }, 1));

            List<Tensor> glooInPlace = ones(pool, elements);
            variants.add(new Variant(GLOO_IN_PLACE, glooInPlace, rank -> glooInPlace.get(rank).fill_(one),
                rank -> glooGroups.get(rank).allReduceSum_(glooInPlace.get(rank)), WORLD));

            for (int run = 0; run < options.runs(); run++) {
                List<Samples> samples = runOnce(pool, variants, options.rounds());
                glooRow.add(samples.get(2), samples.get(1));
                inPlaceRow.add(samples.get(2), samples.get(0));
                inPlaceApiRow.add(samples.get(5), samples.get(0));
                sameRow.add(samples.get(3), samples.get(0));
                double sameGbs = 2.0 * WORLD * bytes / samples.get(3).p50();
                double copyGbs = 2.0 * bytes / samples.get(4).p50();
                sameBandwidth.add(sameGbs);
                copyBandwidth.add(copyGbs);
                bandwidthRatio.add(sameGbs / copyGbs);
            }
            for (Variant v : variants) {
                requireAll(v, v.expected());
            }
        } finally {
            variants.forEach(v -> v.inputs().forEach(Tensor::close));
            direct.forEach(ProcessGroupGloo::close);
            Files.deleteIfExists(directStore);
        }
        return new Rows(List.of(glooRow, inPlaceRow, inPlaceApiRow, sameRow), List.of(sameBandwidth, copyBandwidth, bandwidthRatio));
    }

    /** One run: a warm-up round, then {@code rounds} rounds of {@value #PER_ROUND} samples of every variant in turn. */
    private static List<Samples> runOnce(RankPool pool, List<Variant> variants, int rounds) throws Exception {
        List<Samples> samples = variants.stream().map(v -> new Samples(v.name())).toList();
        for (int round = -1; round < rounds; round++) {
            for (int v = 0; v < variants.size(); v++) {
                for (int i = 0; i < PER_ROUND; i++) {
                    long t = pool.time(variants.get(v).setup(), variants.get(v).body());
                    if (round >= 0) {
                        samples.get(v).add(t);
                    }
                }
            }
        }
        return samples;
    }

    static ProcessGroupGloo glooGroup(Path file, int rank) {
        FileStore store = new FileStore(file.toString(), WORLD);
        ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(new Milliseconds(300_000));
        options.devices().push_back(ProcessGroupGloo.createDeviceForHostname("127.0.0.1"));
        return new ProcessGroupGloo(store, rank, WORLD, options);
    }

    static void allreduceInPlace(ProcessGroupGloo group, Tensor tensor) {
        // The Work holds the tensors until it is closed: left to the garbage collector, a copy's 64 MiB each stayed
        // allocated (without transparent huge pages the JVM reached 24 GB and was killed).
        try (TensorVector v = new TensorVector(tensor); Work work = group.allreduce(v)) {
            work._wait();
        }
    }

    private static List<Tensor> ones(RankPool pool, long elements) throws Exception {
        return pool.onRanks(rank -> torch.ones(elements));
    }

    /** Every element of every input of {@code v} is {@code expected}: 1 for inputs left alone, the world size for the in-place result. */
    private static void requireAll(Variant v, float expected) {
        for (int rank = 0; rank < v.inputs().size(); rank++) {
            try (Tensor min = v.inputs().get(rank).min(); Tensor max = v.inputs().get(rank).max()) {
                if (min.item_float() != expected || max.item_float() != expected) {
                    throw new IllegalStateException("all-reduce benchmark: the inputs of '" + v.name() + "' on rank " + rank + " hold "
                        + min.item_float() + " to " + max.item_float() + ", expected " + expected
                        + " everywhere; a variant changed inputs it does not own or reduced wrongly");
                }
            }
        }
    }
}
