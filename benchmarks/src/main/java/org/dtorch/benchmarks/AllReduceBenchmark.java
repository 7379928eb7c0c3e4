package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.FileStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;

/**
 * All-reduce (SUM) of 64 MiB float32 over 4 ranks in threads: {@code ThreadGroup.allReduce} on Gloo
 * against {@code ProcessGroupGloo.allreduce} called directly (in place, no copy), and the same-device
 * backend against Gloo. A third baseline calls Gloo directly on a fresh copy of the input, the same
 * contract as {@code ThreadGroup} (the input is left alone), to separate the cost of that contract from
 * the wrapper's own. Variants are interleaved in rounds so drift of this noisy machine hits all alike;
 * each sample is rank 0's time from a common start to its result.
 */
final class AllReduceBenchmark {
    private static final int WORLD = 4;
    private static final long ELEMENTS = 16L * 1024 * 1024; // 64 MiB of float32
    private static final int ROUNDS = Integer.getInteger("bench.rounds", 6);
    private static final int PER_ROUND = 5;

    private AllReduceBenchmark() {
    }

    static void run(Report report) throws Exception {
        report.section("ThreadGroup.allReduce, 4 ranks, 64 MiB float32",
            "Rank 0's time per all-reduce (SUM), ranks released together by a barrier; "
                + "ThreadGroup returns a new tensor (one 64 MiB copy), the direct call reduces in place.");
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        Path directStore = Files.createTempFile("dtorch-bench-gloo", ".filestore");
        Files.delete(directStore);
        try (RankPool pool = new RankPool(WORLD);
             ThreadGroupManager gloo = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(300));
             ThreadGroupManager same = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            List<ProcessGroupGloo> direct = pool.onRanks(rank -> {
                FileStore store = new FileStore(directStore.toString(), WORLD);
                ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(new Milliseconds(300_000));
                options.devices().push_back(ProcessGroupGloo.createDeviceForHostname("127.0.0.1"));
                return new ProcessGroupGloo(store, rank, WORLD, options);
            });
            List<ThreadGroup> glooGroups = pool.onRanks(rank -> gloo.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<ThreadGroup> sameGroups = pool.onRanks(rank -> same.getThreadGroup(DeviceKind.CPU, ids, rank));
            List<Tensor> inputs = pool.onRanks(rank -> torch.ones(ELEMENTS));

            Samples directSamples = new Samples("ProcessGroupGloo direct, in place", ROUNDS * PER_ROUND);
            Samples copySamples = new Samples("ProcessGroupGloo direct on a copy", ROUNDS * PER_ROUND);
            Samples glooSamples = new Samples("ThreadGroup (gloo)", ROUNDS * PER_ROUND);
            Samples sameSamples = new Samples("ThreadGroup (same-device)", ROUNDS * PER_ROUND);
            for (int round = -1; round < ROUNDS; round++) { // round -1 warms up
                boolean record = round >= 0;
                for (int i = 0; i < PER_ROUND; i++) {
                    long t = pool.time(rank -> {
                        try (TensorVector v = new TensorVector(inputs.get(rank))) {
                            direct.get(rank).allreduce(v)._wait();
                        }
                    });
                    if (record) {
                        directSamples.add(t);
                    }
                }
                for (int i = 0; i < PER_ROUND; i++) {
                    long t = pool.time(rank -> {
                        try (Tensor copy = inputs.get(rank).clone(); TensorVector v = new TensorVector(copy)) {
                            direct.get(rank).allreduce(v)._wait();
                        }
                    });
                    if (record) {
                        copySamples.add(t);
                    }
                }
                for (int i = 0; i < PER_ROUND; i++) {
                    long t = pool.time(rank -> glooGroups.get(rank).allReduce(inputs.get(rank)).close());
                    if (record) {
                        glooSamples.add(t);
                    }
                }
                for (int i = 0; i < PER_ROUND; i++) {
                    long t = pool.time(rank -> sameGroups.get(rank).allReduce(inputs.get(rank)).close());
                    if (record) {
                        sameSamples.add(t);
                    }
                }
            }
            report.row("Gloo through ThreadGroup vs direct", glooSamples, directSamples, "ratio >= 0.95");
            report.row("Gloo through ThreadGroup vs direct, same contract", glooSamples, copySamples, "(not a goal: context)");
            report.row("same-device backend vs Gloo", sameSamples, glooSamples, "ratio >= 3");
            direct.forEach(ProcessGroupGloo::close);
            inputs.forEach(Tensor::close);
        } finally {
            Files.deleteIfExists(directStore);
        }
    }

}
