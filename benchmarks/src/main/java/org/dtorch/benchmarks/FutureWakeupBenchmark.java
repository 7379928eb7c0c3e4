package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;
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
 * parked and must be woken by the scheduler). Each variant sets a tensor of its own.
 */
final class FutureWakeupBenchmark {

    private FutureWakeupBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("TensorFuture wake-up", "future",
            "`setValue` on one thread to `get()` returning on a thread already blocked in it; baseline: "
                + "`CompletableFuture.complete` to `get()` in the same scenario. The producer waits until the getter is inside `get()`, "
                + "then 20 us (the getter is still in its 50 us spin) or 1 ms (it has parked). Per run " + Unit.count(options.iterations(20_000))
                + " (20 us) and " + Unit.count(options.iterations(2_000)) + " (1 ms) wake-ups, after one warm-up round before the first run.");
        List<Comparison> rows = new ArrayList<>();
        try (Tensor oursValue = torch.ones(256); Tensor plainValue = torch.ones(256)) {
            for (long delayMicros : new long[] {20, 1000}) {
                int iterations = options.iterations(delayMicros < 100 ? 20_000 : 2_000);
                String label = delayMicros < 100 ? "getter blocked 20 us (spinning)" : "getter blocked 1 ms (parked)";
                Comparison row = new Comparison(label, Goal.p50AtMost(10_000));
                measure(oursValue, iterations, delayMicros, true); // warm-up
                measure(plainValue, iterations, delayMicros, false);
                for (int run = 0; run < options.runs(); run++) {
                    row.add(measure(oursValue, iterations, delayMicros, true), measure(plainValue, iterations, delayMicros, false));
                }
                rows.add(row);
            }
        }
        report.comparisons(rows);
    }

    /**
     * A parked getter (the setter waits 1 ms) of a MEMORY {@code TensorFuture} against {@code CompletableFuture}, run by
     * run. Goal: within 1.1x of the JDK's park and unpark.
     */
    static Comparison parked(BenchOptions options) throws Exception {
        Comparison row = new Comparison("TensorFuture, getter parked 1 ms", new Goal("within 1.1x (ratio >= 0.91)", Goal.Target.RATIO,
            r -> r >= 1 / 1.1));
        int iterations = options.iterations(2_000);
        try (Tensor oursValue = torch.ones(256); Tensor plainValue = torch.ones(256)) {
            measure(oursValue, iterations, 1000, true); // warm-up
            measure(plainValue, iterations, 1000, false);
            for (int run = 0; run < options.runs(); run++) {
                row.add(measure(oursValue, iterations, 1000, true), measure(plainValue, iterations, 1000, false));
            }
        }
        return row;
    }

    private static Samples measure(Tensor value, int iterations, long delayMicros, boolean ours) throws Exception {
        Samples samples = new Samples(ours ? "TensorFuture" : "CompletableFuture");
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
