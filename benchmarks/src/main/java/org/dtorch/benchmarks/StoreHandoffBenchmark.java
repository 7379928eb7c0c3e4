package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.SynchronousQueue;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * One producer, one consumer: the time from the producer's {@code srcSet} to the consumer's
 * {@code destGet} returning, against a {@link SynchronousQueue} hand-off (the JDK's own thread-to-thread
 * hand-off) of a tensor of the same size. Each iteration runs the whole four-step handshake; the clock is
 * read on both threads ({@link System#nanoTime()} is one monotonic clock per JVM). Each variant hands off
 * a tensor of its own.
 */
final class StoreHandoffBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long SMALL = 1024;
    private static final long LARGE = 256L * 1024 * 1024;

    private StoreHandoffBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("MemoryTensorStore hand-off", "store",
            "Producer `srcSet` to consumer `destGet` returning, the whole four-step handshake per iteration, two threads; baseline: "
                + "`SynchronousQueue.put` to `take` of a tensor of the same size (the consumer then acknowledges, like "
                + "`srcWaitUntilGetFinished`). Per run " + Unit.count(options.iterations(20_000)) + " iterations (1 KiB) and "
                + Unit.count(options.iterations(5_000)) + " (" + Unit.size(options.bytes(LARGE)) + "), after one warm-up round before the first run.");
        List<Comparison> rows = new ArrayList<>();
        for (long fullBytes : new long[] {SMALL, LARGE}) {
            long bytes = options.bytes(fullBytes);
            int iterations = options.iterations(fullBytes == SMALL ? 20_000 : 5_000);
            String label = Unit.size(bytes) + " float32";
            Comparison row = new Comparison(label, fullBytes == SMALL ? Goal.p50AtMost(5_000) : Goal.context("size-independent: zero-copy"));
            try (Tensor storeValue = torch.ones(bytes / 4); Tensor queueValue = torch.ones(bytes / 4)) {
                storeHandoff(storeValue, iterations); // warm-up
                queueHandoff(queueValue, iterations);
                for (int run = 0; run < options.runs(); run++) {
                    row.add(storeHandoff(storeValue, iterations), queueHandoff(queueValue, iterations));
                }
            }
            rows.add(row);
        }
        report.comparisons(rows);
    }

    private static Samples storeHandoff(Tensor value, int iterations) throws Exception {
        String key = "bench/handoff-" + System.nanoTime();
        TensorStore[] stores = new TensorStore[2];
        Thread creator = Thread.ofPlatform().start(() -> stores[1] = TensorStore.create(info(key, 1)));
        stores[0] = TensorStore.create(info(key, 0));
        creator.join();
        long[] sent = new long[iterations];
        Samples result = new Samples("MemoryTensorStore");
        try {
            Thread consumer = Thread.ofPlatform().start(() -> {
                for (int i = 0; i < iterations; i++) {
                    try (Tensor got = stores[1].destGet("x", CPU)) {
                        result.add(System.nanoTime() - sent[i]);
                    }
                    stores[1].destFinishGet("x", CPU);
                }
            });
            for (int i = 0; i < iterations; i++) {
                sent[i] = System.nanoTime();
                stores[0].srcSet("x", value, CPU, 1);
                stores[0].srcWaitUntilGetFinished("x", CPU);
            }
            consumer.join();
        } finally {
            stores[0].close();
            stores[1].close();
        }
        return result;
    }

    private static Samples queueHandoff(Tensor value, int iterations) throws Exception {
        SynchronousQueue<Tensor> queue = new SynchronousQueue<>();
        SynchronousQueue<Boolean> done = new SynchronousQueue<>();
        long[] sent = new long[iterations];
        Samples result = new Samples("SynchronousQueue");
        Thread consumer = Thread.ofPlatform().start(() -> {
            try {
                for (int i = 0; i < iterations; i++) {
                    queue.take();
                    result.add(System.nanoTime() - sent[i]);
                    done.put(Boolean.TRUE);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        for (int i = 0; i < iterations; i++) {
            sent[i] = System.nanoTime();
            queue.put(value);
            done.take(); // like srcWaitUntilGetFinished: the producer waits for the consumer
        }
        consumer.join();
        return result;
    }

    private static TensorStoreCreateInfo info(String key, int rank) {
        return TensorStoreCreateInfo.builder().storeKey(key).worldSize(2).rank(rank).timeout(Duration.ofSeconds(60)).build();
    }
}
