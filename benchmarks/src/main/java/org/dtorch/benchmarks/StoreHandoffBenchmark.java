package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.concurrent.SynchronousQueue;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * One producer, one consumer: the time from the producer's {@code srcSet} to the consumer's
 * {@code destGet} returning, against a {@link SynchronousQueue} hand-off of the same tensor. Each
 * iteration runs the whole four-step handshake; the clock is read on both threads
 * ({@link System#nanoTime()} is one monotonic clock per JVM).
 */
final class StoreHandoffBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));

    private StoreHandoffBenchmark() {
    }

    static void run(Report report) throws Exception {
        report.section("MemoryTensorStore hand-off",
            "Producer `srcSet` to consumer `destGet` return, whole handshake per iteration, 2 threads; baseline: "
                + "`SynchronousQueue.put` to `take` of the same tensor.");
        for (long bytes : new long[] {1024, 256L * 1024 * 1024}) {
            int iterations = bytes <= 1024 ? 20_000 : 5_000;
            try (Tensor value = torch.ones(bytes / 4)) {
                Samples store = null;
                Samples queue = null;
                for (int round = 0; round < 2; round++) { // round 0 warms up
                    store = storeHandoff(value, iterations);
                    queue = queueHandoff(value, iterations);
                }
                String label = bytes <= 1024 ? "1 KiB float32" : "256 MiB float32";
                report.row(label, store, queue, "p50 <= 5 us, size-independent");
            }
        }
    }

    private static Samples storeHandoff(Tensor value, int iterations) throws Exception {
        String key = "bench/handoff-" + System.nanoTime();
        TensorStore[] stores = new TensorStore[2];
        Thread creator = Thread.ofPlatform().start(() -> stores[1] = TensorStore.create(info(key, 1)));
        stores[0] = TensorStore.create(info(key, 0));
        creator.join();
        long[] sent = new long[iterations];
        Samples samples = new Samples("SynchronousQueue", iterations);
        Samples result = new Samples("MemoryTensorStore", iterations);
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
        stores[0].close();
        stores[1].close();
        return samples.count() == 0 ? result : samples;
    }

    private static Samples queueHandoff(Tensor value, int iterations) throws Exception {
        SynchronousQueue<Tensor> queue = new SynchronousQueue<>();
        SynchronousQueue<Boolean> done = new SynchronousQueue<>();
        long[] sent = new long[iterations];
        Samples result = new Samples("SynchronousQueue", iterations);
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
