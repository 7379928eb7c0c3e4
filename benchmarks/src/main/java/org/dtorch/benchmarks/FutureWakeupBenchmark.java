package org.dtorch.benchmarks;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;

/**
 * The time from {@code setValue} to a blocked {@code get()} returning on another thread, against a
 * plain {@link CompletableFuture} {@code complete} to {@code get}. The producer waits until the getter
 * is inside {@code get()} and then a fixed delay: 20 us (the getter is still spinning) or 1 ms (it has
 * parked and must be woken by the scheduler).
 */
final class FutureWakeupBenchmark {

    private FutureWakeupBenchmark() {
    }

    static void run(Report report) throws Exception {
        report.section("TensorFuture wake-up",
            "`setValue` on one thread to `get()` returning on a thread already blocked in it; baseline: "
                + "`CompletableFuture.complete` to `get()` in the same scenario.");
        try (Tensor value = torch.ones(256)) {
            for (long delayMicros : new long[] {20, 1000}) {
                int iterations = delayMicros < 100 ? 20_000 : 2_000;
                Samples ours = null;
                Samples plain = null;
                for (int round = 0; round < 2; round++) {
                    ours = measure(value, iterations, delayMicros, true);
                    plain = measure(value, iterations, delayMicros, false);
                }
                String label = delayMicros < 100 ? "getter blocked 20 us (spinning)" : "getter blocked 1 ms (parked)";
                report.row(label, ours, plain, "p50 <= 10 us");
            }
        }
    }

    private static Samples measure(Tensor value, int iterations, long delayMicros, boolean ours) throws Exception {
        Samples samples = new Samples(ours ? "TensorFuture" : "CompletableFuture", iterations);
        for (int i = 0; i < iterations; i++) {
            AtomicBoolean waiting = new AtomicBoolean();
            long[] setAt = new long[1];
            long[] gotAt = new long[1];
            Thread getter;
            if (ours) {
                TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
                TensorFuture future = promise.getFuture();
                getter = Thread.ofPlatform().start(() -> {
                    waiting.set(true);
                    try (Tensor got = future.get()) {
                        gotAt[0] = System.nanoTime();
                    }
                });
                awaitThenDelay(waiting, delayMicros);
                setAt[0] = System.nanoTime();
                promise.setValue(value);
            } else {
                CompletableFuture<Tensor> future = new CompletableFuture<>();
                getter = Thread.ofPlatform().start(() -> {
                    waiting.set(true);
                    try {
                        future.get(60, TimeUnit.SECONDS);
                        gotAt[0] = System.nanoTime();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
                awaitThenDelay(waiting, delayMicros);
                setAt[0] = System.nanoTime();
                future.complete(value);
            }
            getter.join();
            samples.add(gotAt[0] - setAt[0]);
        }
        return samples;
    }

    private static void awaitThenDelay(AtomicBoolean waiting, long delayMicros) {
        while (!waiting.get()) {
            Thread.onSpinWait();
        }
        long until = System.nanoTime() + delayMicros * 1000;
        if (delayMicros >= 500) {
            LockSupport.parkNanos(delayMicros * 1000);
        }
        while (System.nanoTime() < until) {
            Thread.onSpinWait();
        }
    }
}
