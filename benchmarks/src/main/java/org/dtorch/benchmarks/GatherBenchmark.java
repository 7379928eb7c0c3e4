package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;

/**
 * TeleFuser's {@code allGatherStacked} (one gather into one {@code [world, ...]} allocation) against the form it
 * replaces, an all-gather into a list of per-rank tensors followed by {@code stack}, on 4 rank threads, per rank
 * 1 KiB, 1 MiB and 16 MiB of float32. On Gloo the baseline is c10d's {@code allgather} called directly on
 * {@code ProcessGroupGloo} (a fresh tensor per rank, then {@code torch.stack}); on the same-device backend, where
 * there is no c10d, it is the backend's own list form, {@code allGatherIntoVec} (each peer's tensor copied), then
 * {@code stack}. Variants alternate in rounds, and so does which goes first; every variant's inputs (rank {@code r}
 * holds {@code r + 1}) are checked unchanged afterwards, and one result of each against the expected rows first.
 */
final class GatherBenchmark {
    private static final int WORLD = 4;
    private static final int PER_ROUND = 5;
    private static final List<Long> PER_RANK_BYTES = List.of(1L << 10, 1L << 20, 16L << 20);

    private GatherBenchmark() {
    }

    /** A rank's gather: its input in, the stacked {@code [world, n]} result out. */
    private interface Gather {
        Tensor run(int rank, Tensor input);
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("allGatherStacked against per-rank all-gathers, 4 rank threads", "gathers",
            "Rank 0's time per gather of one float32 tensor per rank into a stacked `[4, n]` result, ranks released together by a "
                + "barrier; per run " + options.rounds() * PER_ROUND + " samples per variant, alternating in rounds "
                + "(which goes first alternates too), after a warm-up round. "
                + "Baseline on Gloo: c10d `allgather` on `ProcessGroupGloo` directly into a list of 4 fresh per-rank tensors, then "
                + "`torch.stack`; on the same-device backend: `allGatherIntoVec` (every peer's tensor copied), then `stack`. The ratio is "
                + "baseline / `allGatherStacked`: above 1 when the stacked gather is the faster.");
        List<Long> sizes = PER_RANK_BYTES.stream().filter(b -> options.bytes(b) == b).toList();
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        Path directStore = Files.createTempFile("dtorch-bench-gather", ".filestore");
        Files.delete(directStore);
        List<Comparison> rows = new ArrayList<>();
        List<ProcessGroupGloo> direct = new ArrayList<>();
        try (RankPool pool = new RankPool(WORLD);
             ThreadGroupManager gloo = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300));
             ThreadGroupManager same = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            direct.addAll(pool.onRanks(rank -> AllReduceBenchmark.glooGroup(directStore, rank)));
            List<ThreadGroup> glooGroups = pool.onRanks(rank -> gloo.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<ThreadGroup> sameGroups = pool.onRanks(rank -> same.getThreadGroup(DeviceKind.CPU, ids, rank));
            for (long bytes : sizes) {
                String size = Unit.size(bytes) + " per rank";
                rows.add(compare(pool, options, "Gloo, " + size, bytes,
                    (rank, in) -> glooGroups.get(rank).allGatherStacked(in), "c10d allgather, stack", (rank, in) -> listGather(direct.get(rank), in)));
                rows.add(compare(pool, options, "same-device, " + size, bytes,
                    (rank, in) -> sameGroups.get(rank).allGatherStacked(in), "allGatherIntoVec, stack",
                    (rank, in) -> stack(sameGroups.get(rank).allGatherIntoVec(in, 0, in.size(0) * WORLD))));
            }
        } finally {
            direct.forEach(ProcessGroupGloo::close);
            Files.deleteIfExists(directStore);
        }
        report.comparisons(rows);
    }

    /** One row: {@code options.runs()} runs of both variants on inputs of their own. */
    private static Comparison compare(RankPool pool, BenchOptions options, String label, long bytes, Gather stacked,
        String baselineName, Gather list) throws Exception {
        long elements = bytes / Float.BYTES;
        Comparison row = new Comparison(label, Goal.ratioAtLeast(1));
        List<Tensor> stackedInputs = pool.onRanks(rank -> filled(elements, rank));
        List<Tensor> listInputs = pool.onRanks(rank -> filled(elements, rank));
        try {
            pool.onRanks(rank -> {
                requireRows(label + ", allGatherStacked", stacked, rank, stackedInputs.get(rank));
                requireRows(label + ", " + baselineName, list, rank, listInputs.get(rank));
                return null;
            });
            for (int run = 0; run < options.runs(); run++) {
                Samples measured = new Samples("allGatherStacked");
                Samples baseline = new Samples(baselineName);
                AlternatingRounds.measure(pool, options.rounds(), PER_ROUND, rank -> stacked.run(rank, stackedInputs.get(rank)).close(),
                    measured, rank -> list.run(rank, listInputs.get(rank)).close(), baseline);
                row.add(measured, baseline);
            }
            pool.onRanks(rank -> {
                requireFilled(label + ", allGatherStacked's input", stackedInputs.get(rank), rank);
                requireFilled(label + ", " + baselineName + "'s input", listInputs.get(rank), rank);
                return null;
            });
        } finally {
            stackedInputs.forEach(Tensor::close);
            listInputs.forEach(Tensor::close);
        }
        return row;
    }

    /** c10d's list form: a fresh tensor per rank, one {@code allgather} into them, then {@code stack}. */
    private static Tensor listGather(ProcessGroupGloo group, Tensor input) {
        List<Tensor> outputs = new ArrayList<>(WORLD);
        try {
            for (int r = 0; r < WORLD; r++) {
                outputs.add(torch.empty_like(input));
            }
            try (TensorVector perRank = new TensorVector(outputs.toArray(Tensor[]::new)); TensorVector in = new TensorVector(input);
                 AllgatherOptions o = new AllgatherOptions(); Work work = group.allgather(perRank, in, o)) {
                work._wait();
            }
            return stack(outputs);
        } finally {
            outputs.forEach(Tensor::close);
        }
    }

    /** {@code torch.stack(tensors)}; closes {@code tensors}. */
    private static Tensor stack(List<Tensor> tensors) {
        try (TensorVector vector = new TensorVector(tensors.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(vector)) {
            return torch.stack(ref, 0);
        } finally {
            tensors.forEach(Tensor::close);
        }
    }

    private static Tensor filled(long elements, int rank) {
        try (Scalar value = new Scalar(rank + 1f)) {
            return torch.full(new long[] {elements}, value);
        }
    }

    /** One gather of {@code gather} on this rank: row {@code r} of the result must hold {@code r + 1} everywhere. */
    private static void requireRows(String variant, Gather gather, int rank, Tensor input) {
        try (Tensor result = gather.run(rank, input)) {
            for (int r = 0; r < WORLD; r++) {
                try (Tensor row = result.select(0, r)) {
                    requireFilled(variant + ", row " + r + " on rank " + rank, row, r);
                }
            }
        }
    }

    private static void requireFilled(String what, Tensor t, int rank) {
        try (Tensor min = t.min(); Tensor max = t.max()) {
            if (min.item_float() != rank + 1f || max.item_float() != rank + 1f) {
                throw new IllegalStateException("gather benchmark: " + what + " holds " + min.item_float() + " to " + max.item_float()
                    + ", expected " + (rank + 1f) + " everywhere");
            }
        }
    }
}
