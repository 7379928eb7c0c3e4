package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.ReduceScatterOptions;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;

/**
 * The Gloo backend's reduce-scatter and all-gather round its ring of sends and receives against c10d's out-of-place
 * calls, called directly on {@code ProcessGroupGloo}, on 4 rank threads: a
 * reduce-scatter (SUM) of 64 MiB float32 per rank into 16 MiB ({@code _reduce_scatter_base}, which Gloo runs as a
 * clone, an all-reduce and a copy), and an all-gather of 16 MiB per rank into 64 MiB ({@code _allgather_base}, into a
 * fresh flat tensor and copied out). Both sides return a new tensor and leave the input alone. Variants alternate in
 * rounds, and so does which goes first; one result of each is checked first, the inputs afterwards.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class GlooRingBenchmark {
    private static final int WORLD = 4;
    private static final int PER_ROUND = 5;
    private static final long FULL_BYTES = 64L << 20;

    private GlooRingBenchmark() {
    }

    /** A rank's collective: its input in, a new result out. */
    private interface Collective {
        Tensor run(int rank, Tensor input);
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(FULL_BYTES);
        long elements = bytes / Float.BYTES;
        report.section("Gloo reduce-scatter and all-gather round the ring, " + WORLD + " rank threads, float32", "gloorings",
            "Rank 0's time per collective, ranks released together by a barrier; per run " + options.rounds() * PER_ROUND
                + " samples per variant, alternating in rounds (which goes first alternates too), after a warm-up round. "
                + "Reduce-scatter: " + Unit.size(bytes) + " per rank in, a quarter out; all-gather: a quarter of that per rank in, "
                + Unit.size(bytes) + " out. Baselines: c10d's `_reduce_scatter_base` and `_allgather_base` on `ProcessGroupGloo` "
                + "directly, into a fresh tensor, as `ThreadGroup` called them before; the ratio is baseline / ring.");
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        Path directStore = Files.createTempFile("dtorch-bench-rings", ".filestore");
        Files.delete(directStore);
        List<ProcessGroupGloo> direct = new ArrayList<>();
        List<Comparison> rows = new ArrayList<>();
        try (RankPool pool = new RankPool(WORLD);
             ThreadGroupManager gloo = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            direct.addAll(pool.onRanks(rank -> AllReduceBenchmark.glooGroup(directStore, rank)));
            List<ThreadGroup> groups = pool.onRanks(rank -> gloo.getThreadGroup(DeviceKind.CPU, ids, rank));
            rows.add(compare(pool, options, "reduce-scatter (SUM), ThreadGroup round the ring", elements, 10f,
                (rank, in) -> groups.get(rank).reduceScatterTensor(in, ReduceOpType.SUM), "c10d `_reduce_scatter_base`",
                (rank, in) -> reduceScatterBase(direct.get(rank), in)));
            rows.add(compare(pool, options, "all-gather, ThreadGroup round the ring", elements / WORLD, -1f,
                (rank, in) -> groups.get(rank).allGatherIntoTensor(in, in.size(0) * WORLD), "c10d `_allgather_base`",
                (rank, in) -> allGatherBase(direct.get(rank), in)));
        } finally {
            direct.forEach(ProcessGroupGloo::close);
            Files.deleteIfExists(directStore);
        }
        report.comparisons(rows);
    }

    /**
     * One row: {@code options.runs()} runs of both variants on inputs of their own ({@code elements} per rank, rank r
     * holding r + 1). {@code sum} is what every element of a result holds, or negative for a gather (chunk r holds r + 1).
     */
    private static Comparison compare(RankPool pool, BenchOptions options, String label, long elements, float sum, Collective ring,
                                      String baselineName, Collective baseline) throws Exception {
        Comparison row = new Comparison(label, Goal.ratioAtLeast(1));
        List<Tensor> ringInputs = pool.onRanks(rank -> filled(elements, rank));
        List<Tensor> baselineInputs = pool.onRanks(rank -> filled(elements, rank));
        try {
            pool.onRanks(rank -> {
                requireResult(label, ring, rank, ringInputs.get(rank), sum);
                requireResult(baselineName, baseline, rank, baselineInputs.get(rank), sum);
                return null;
            });
            for (int run = 0; run < options.runs(); run++) {
                Samples measured = new Samples(label);
                Samples base = new Samples(baselineName);
                AlternatingRounds.measure(pool, options.rounds(), PER_ROUND, rank -> ring.run(rank, ringInputs.get(rank)).close(), measured,
                    rank -> baseline.run(rank, baselineInputs.get(rank)).close(), base);
                row.add(measured, base);
            }
            pool.onRanks(rank -> {
                requireFilled(label + "'s input on rank " + rank, ringInputs.get(rank), rank + 1f);
                requireFilled(baselineName + "'s input on rank " + rank, baselineInputs.get(rank), rank + 1f);
                return null;
            });
        } finally {
            ringInputs.forEach(Tensor::close);
            baselineInputs.forEach(Tensor::close);
        }
        return row;
    }

    private static Tensor reduceScatterBase(ProcessGroupGloo group, Tensor input) {
        Tensor out = torch.empty(input.numel() / WORLD);
        try (ReduceScatterOptions o = new ReduceScatterOptions(); Work work = group._reduce_scatter_base(out, input, o)) {
            work._wait();
        }
        return out;
    }

    private static Tensor allGatherBase(ProcessGroupGloo group, Tensor input) {
        Tensor out = torch.empty(input.numel() * WORLD);
        try (AllgatherOptions o = new AllgatherOptions(); Work work = group._allgather_base(out, input, o)) {
            work._wait();
        }
        return out;
    }

    private static Tensor filled(long elements, int rank) {
        try (Scalar value = new Scalar(rank + 1f)) {
            return torch.full(new long[] {elements}, value);
        }
    }

    /** One call of {@code collective} on this rank, its result checked: all {@code sum}, or chunk r all r + 1 for a gather. */
    private static void requireResult(String variant, Collective collective, int rank, Tensor input, float sum) {
        try (Tensor result = collective.run(rank, input)) {
            if (sum >= 0) {
                requireFilled(variant + " on rank " + rank, result, sum);
                return;
            }
            long chunk = result.numel() / WORLD;
            for (int r = 0; r < WORLD; r++) {
                try (Tensor piece = result.narrow(0, r * chunk, chunk)) {
                    requireFilled(variant + ", chunk " + r + " on rank " + rank, piece, r + 1f);
                }
            }
        }
    }

    private static void requireFilled(String what, Tensor t, float value) {
        try (Tensor min = t.min(); Tensor max = t.max()) {
            if (min.item_float() != value || max.item_float() != value) {
                throw new IllegalStateException("gloorings benchmark: " + what + " holds " + min.item_float() + " to " + max.item_float()
                    + ", expected " + value + " everywhere");
            }
        }
    }
}
