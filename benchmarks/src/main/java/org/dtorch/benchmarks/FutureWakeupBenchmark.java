package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;

/**
 * The time from {@code setValue} to a blocked {@code get()} returning on another thread, against a
 * plain {@link CompletableFuture} {@code complete} to {@code get}. The getter makes the promise (or the
 * {@code CompletableFuture}), hands it to the setter (the harness thread) and blocks in {@code get()}; the setter
 * waits a fixed delay, 20 us (the getter is still spinning) or 1 ms (it has parked and must be woken by the
 * scheduler), reads the clock and completes. Each variant sets a tensor of its own.
 *
 * <p>The getter is one long-lived thread that blocks once per wake-up, as a runtime's client thread or worker does
 * (the JDK future's getter touches no native code, so a fresh thread per wake-up would charge its native set-up to one
 * side only); a secondary row starts a new getter thread per wake-up, which shows that set-up: a fresh thread's first
 * JavaCPP and libtorch handles, charged to the future's side.
 *
 * <p>Thread-safe: stateless; the harness thread runs it, and starts the getter threads.
 */
final class FutureWakeupBenchmark {
    private static final long PARKED_MICROS = 1000;

    private FutureWakeupBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("TensorFuture wake-up", "future",
            "`setValue` on one thread to `get()` returning on a thread already blocked in it; baseline: "
                + "`CompletableFuture.complete` to `get()` in the same scenario. The getter is one long-lived thread that makes "
                + "the promise, hands it to the setter and blocks in `get()`, once per wake-up; the setter waits 20 us (the getter "
                + "is still in its 50 us spin) or 1 ms (it has parked), then completes. Per run " + Unit.count(options.iterations(20_000))
                + " (20 us) and " + Unit.count(options.iterations(2_000)) + " (1 ms) wake-ups, after one warm-up round before the first "
                + "run. The last row starts a new getter thread per wake-up (both sides alike), which adds a fresh thread's first "
                + "JavaCPP and libtorch handles to the future's side.");
        List<Comparison> rows = new ArrayList<>();
        rows.add(row("getter blocked 20 us (spinning)", Goal.p50AtMost(10_000), options, 20, options.iterations(20_000), false));
        rows.add(row("getter blocked 1 ms (parked)", Goal.p50AtMost(10_000), options, PARKED_MICROS, options.iterations(2_000), false));
        rows.add(row("getter blocked 1 ms (parked), a new getter thread per wake-up", Goal.context("secondary: thread start-up"),
            options, PARKED_MICROS, options.iterations(2_000), true));
        report.comparisons(rows);
    }

    /**
     * A parked getter (the setter waits 1 ms) of a MEMORY {@code TensorFuture} against {@code CompletableFuture}, run by
     * run: the long-lived getter's row (goal: within 1.1x of the JDK's park and unpark), then the same with a new getter
     * thread per wake-up (secondary, no goal).
     */
    static List<Comparison> parked(BenchOptions options) throws Exception {
        int iterations = options.iterations(2_000);
        Comparison longLived = row("TensorFuture, getter parked 1 ms", new Goal("within 1.1x (ratio >= 0.91)", Goal.Target.RATIO,
            r -> r >= 1 / 1.1), options, PARKED_MICROS, iterations, false);
        Comparison fresh = row("TensorFuture, getter parked 1 ms, a new getter thread per wake-up (secondary)",
            Goal.context("thread start-up included"), options, PARKED_MICROS, iterations, true);
        return List.of(longLived, fresh);
    }

    private static Comparison row(String label, Goal goal, BenchOptions options, long delayMicros, int iterations, boolean freshThreads)
        throws Exception {
        Comparison row = new Comparison(label, goal);
        try (Tensor oursValue = torch.ones(256); Tensor plainValue = torch.ones(256)) {
            measure(oursValue, iterations, delayMicros, true, freshThreads); // warm-up
            measure(plainValue, iterations, delayMicros, false, freshThreads);
            for (int run = 0; run < options.runs(); run++) {
                row.add(measure(oursValue, iterations, delayMicros, true, freshThreads),
                    measure(plainValue, iterations, delayMicros, false, freshThreads));
            }
        }
        return row;
    }

    /** What passes from the getter to the setter for one wake-up, and the setter's clock. Thread-safe through its fields. */
    private static final class Exchange {
        /** The promise (or {@code CompletableFuture}) of the wake-up in progress; null while the getter prepares the next. */
        volatile Object pending;
        volatile long setAt;
    }

    private static Samples measure(Tensor value, int iterations, long delayMicros, boolean ours, boolean freshThreads) throws Exception {
        Samples samples = new Samples(ours ? "TensorFuture" : "CompletableFuture");
        long[] latencies = new long[iterations];
        Exchange exchange = new Exchange();
        if (freshThreads) {
            for (int i = 0; i < iterations; i++) {
                int k = i;
                Thread getter = Thread.ofPlatform().start(() -> latencies[k] = getOnce(exchange, ours));
                setOnce(exchange, value, delayMicros, ours);
                getter.join();
            }
        } else {
            Thread getter = Thread.ofPlatform().name("wake-up getter").start(() -> {
                for (int i = 0; i < iterations; i++) {
                    latencies[i] = getOnce(exchange, ours);
                }
            });
            for (int i = 0; i < iterations; i++) {
                setOnce(exchange, value, delayMicros, ours);
            }
            getter.join();
        }
        for (long latency : latencies) {
            samples.add(latency);
        }
        return samples;
    }

    /** The getter's side of one wake-up: make the promise, hand it over, block in {@code get()}; the latency. */
    private static long getOnce(Exchange exchange, boolean ours) {
        if (ours) {
            TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
            TensorFuture future = promise.getFuture();
            exchange.pending = promise;
            try (Tensor got = future.get()) {
                return System.nanoTime() - exchange.setAt;
            }
        }
        CompletableFuture<Tensor> future = new CompletableFuture<>();
        exchange.pending = future;
        try {
            future.get(60, TimeUnit.SECONDS);
            return System.nanoTime() - exchange.setAt;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** The setter's side: take the getter's promise, wait the delay, read the clock, complete. */
    @SuppressWarnings("unchecked")
    private static void setOnce(Exchange exchange, Tensor value, long delayMicros, boolean ours) {
        Object pending;
        while ((pending = exchange.pending) == null) {
            Thread.onSpinWait();
        }
        exchange.pending = null;
        long until = System.nanoTime() + delayMicros * 1000;
        if (delayMicros >= 500) {
            LockSupport.parkNanos(delayMicros * 1000);
        }
        while (System.nanoTime() < until) {
            Thread.onSpinWait();
        }
        exchange.setAt = System.nanoTime();
        if (ours) {
            ((TensorPromise) pending).setValue(value);
        } else {
            ((CompletableFuture<Tensor>) pending).complete(value);
        }
    }
}
