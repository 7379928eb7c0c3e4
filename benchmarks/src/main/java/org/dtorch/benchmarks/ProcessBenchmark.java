package org.dtorch.benchmarks;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.runtime.process.JvmCommand;

/**
 * Per-device-process mode: the File store and promises between this JVM and a peer JVM
 * ({@link ProcessBenchPeer}), a blocked waiter's CPU use, and the per-operator cost of process mode
 * against thread mode.
 */
final class ProcessBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long BIG = 256L * 1024 * 1024;

    private ProcessBenchmark() {
    }

    static void run(Report report) throws Exception {
        String instance = GlobalCommInstanceId.next();
        report.section("File store between two processes",
            "This JVM produces, a second JVM consumes, over `/dev/shm` with futex waits. Large: producer `srcSet` to its "
                + "`srcWaitUntilGetFinished` returning (the producer copies the tensor into shared memory once; the consumer gets a "
                + "view); baseline: one single-threaded `MemorySegment.copy` of the same size between pre-faulted buffers. Small: "
                + "`srcSet` to the consumer's `destGet` returning, read from the producer's clock value inside the tensor; baseline: "
                + "the same hand-off between two threads of one JVM through the memory store.");
        String bandwidth = exchange(report, instance);
        handoff(report, instance);
        report.note(bandwidth);
        report.section("File promise wake-up across processes",
            "A peer JVM completes a File promise while this JVM is blocked in `get()`; latency from the peer's clock just before "
                + "`setValue` to `get()` returning; requests pass through shared memory only. Baseline: a MEMORY promise set by "
                + "another thread of this JVM after the same delay.");
        promiseWakeup(report);
        blockedWaiters(report);
        report.section("Pipeline per operator: process mode against thread mode (1 device)",
            "Mean time per `add` of shape (1,) over a round of 20,000, results dropped, then `sync()`; measured: the device is a "
                + "worker process; baseline: the device is a worker thread.");
        perOperator(report);
    }

    // ---- large exchange ----------------------------------------------------------------------------------

    /** The two large-exchange rows; returns a note on the bandwidths, for after the table. */
    private static String exchange(Report report, String instance) throws Exception {
        int iterations = Integer.getInteger("bench.rounds", 6) * 3;
        String key = "bench/exchange";
        try (Peer peer = Peer.start("consume", instance, key, 2 * (iterations + 2));
             TensorStore store = TensorStore.create(info(instance, key));
             Tensor value = torch.rand(new long[] {BIG / 4})) {
            peer.awaitLine("READY");
            Samples copied = new Samples("single-threaded memcpy", iterations);
            Samples inPlace = new Samples("single-threaded memcpy", iterations);
            Samples memcpy = memcpy(iterations);
            for (int i = -2; i < iterations; i++) {
                long start = System.nanoTime();
                store.srcSet("x", value, CPU, 1);
                store.srcWaitUntilGetFinished("x", CPU);
                if (i >= 0) {
                    copied.add(System.nanoTime() - start);
                }
            }
            try (Tensor shared = store.allocate(new long[] {BIG / 4}, torch.ScalarType.Float)) {
                shared.copy_(value);
                for (int i = -2; i < iterations; i++) {
                    long start = System.nanoTime();
                    store.srcSet("x", shared, CPU, 1);
                    store.srcWaitUntilGetFinished("x", CPU);
                    if (i >= 0) {
                        inPlace.add(System.nanoTime() - start);
                    }
                }
            }
            store.barrier();
            report.row("256 MiB float32, copied once into shared memory", copied, memcpy, "ratio >= 0.8 (at least 0.8x copy bandwidth)");
            report.row("256 MiB float32 allocated in shared memory (`allocate`, no copy)", inPlace, memcpy, "(zero-copy path)");
            return String.format(Locale.ROOT, "Bandwidth of the 256 MiB exchange: %.2f GB/s; of the single-threaded memcpy: %.2f GB/s.",
                BIG / (copied.p50() / 1e9) / 1e9, BIG / (memcpy.p50() / 1e9) / 1e9);
        }
    }

    private static Samples memcpy(int iterations) {
        Samples samples = new Samples("single-threaded memcpy", iterations);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(BIG, 64);
            MemorySegment dst = arena.allocate(BIG, 64);
            src.fill((byte) 1);
            dst.fill((byte) 0);
            for (int i = -2; i < iterations; i++) {
                long start = System.nanoTime();
                MemorySegment.copy(src, ValueLayout.JAVA_BYTE, 0, dst, ValueLayout.JAVA_BYTE, 0, BIG);
                if (i >= 0) {
                    samples.add(System.nanoTime() - start);
                }
            }
        }
        return samples;
    }

    // ---- small hand-off -----------------------------------------------------------------------------------

    private static void handoff(Report report, String instance) throws Exception {
        int iterations = 20_000;
        String key = "bench/latency";
        Samples crossProcess;
        try (Peer peer = Peer.start("latency", instance, key, iterations);
             TensorStore store = TensorStore.create(info(instance, key));
             Tensor value = longs()) {
            peer.awaitLine("READY");
            LongPointer first = new LongPointer(value.data_ptr());
            for (int i = 0; i < iterations; i++) {
                first.put(0, System.nanoTime());
                store.srcSet("x", value, CPU, 1);
                store.srcWaitUntilGetFinished("x", CPU);
            }
            crossProcess = peer.samples("FileTensorStore", iterations);
            store.barrier();
        }
        Samples threads = threadHandoff(iterations);
        report.row("1 KiB int64, cross-process hand-off", crossProcess, threads, "p50 <= 20 us");
    }

    private static Samples threadHandoff(int iterations) throws Exception {
        String key = "bench/thread-latency-" + System.nanoTime();
        TensorStore[] stores = new TensorStore[2];
        Thread creator = Thread.ofPlatform().start(() -> stores[1] = TensorStore.create(memoryInfo(key, 1)));
        stores[0] = TensorStore.create(memoryInfo(key, 0));
        creator.join();
        Samples samples = new Samples("MemoryTensorStore, threads", iterations);
        try (Tensor value = longs()) {
            LongPointer first = new LongPointer(value.data_ptr());
            Thread consumer = Thread.ofPlatform().start(() -> {
                for (int i = 0; i < iterations; i++) {
                    try (Tensor got = stores[1].destGet("x", CPU)) {
                        samples.add(System.nanoTime() - new LongPointer(got.data_ptr()).get(0));
                    }
                    stores[1].destFinishGet("x", CPU);
                }
            });
            for (int i = 0; i < iterations; i++) {
                first.put(0, System.nanoTime());
                stores[0].srcSet("x", value, CPU, 1);
                stores[0].srcWaitUntilGetFinished("x", CPU);
            }
            consumer.join();
        }
        stores[0].close();
        stores[1].close();
        return samples;
    }

    // ---- promise wake-up ----------------------------------------------------------------------------------

    private static void promiseWakeup(Report report) throws Exception {
        String flagName = org.dtorch.core.shm.SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-flags";
        org.dtorch.core.shm.SharedRegion.unlink(flagName);
        try (org.dtorch.core.shm.SharedRegion flags = org.dtorch.core.shm.SharedRegion.create(flagName, 4096).orElseThrow();
             Peer peer = Peer.start("promise", flagName, "-", 0)) {
            peer.awaitLine("READY");
            var seg = flags.segment();
            int sequence = 0;
            for (long delayMicros : new long[] {20, 2000}) {
                int iterations = delayMicros < 100 ? 5_000 : 1_000;
                Samples file = new Samples("FILE promise", iterations);
                for (int i = -200; i < iterations; i++) {
                    TensorPromise promise = TensorPromises.create(TensorPromiseType.FILE);
                    TensorFuture future = promise.getFuture();
                    int n = ++sequence;
                    org.dtorch.core.shm.Shm.putString(seg, 64, 1024, promise.serialize());
                    seg.set(ValueLayout.JAVA_INT, 12, (int) delayMicros);
                    org.dtorch.core.shm.Shm.putIntRelease(seg, 8, n); // request n
                    org.dtorch.core.shm.Futex.wakeAll(seg, 8);
                    while (org.dtorch.core.shm.Shm.getIntAcquire(seg, 0) != n) {
                        Thread.onSpinWait();
                    }
                    org.dtorch.core.shm.Shm.putIntRelease(seg, 4, n); // entering get()
                    try (Tensor got = future.get()) {
                        long latency = System.nanoTime() - new LongPointer(got.data_ptr()).get(0);
                        if (i >= 0) {
                            file.add(latency);
                        }
                    }
                }
                Samples memory = memoryWakeup(iterations, delayMicros);
                String label = delayMicros < 100 ? "setter waits 20 us (getter still spinning)" : "setter waits 2 ms (getter asleep in futex)";
                report.row(label, file, memory, "p50 <= 30 us");
            }
            org.dtorch.core.shm.Shm.putIntRelease(seg, 8, -1);
            org.dtorch.core.shm.Futex.wakeAll(seg, 8);
        } finally {
            org.dtorch.core.shm.SharedRegion.unlink(flagName);
        }
        futexFloor(report);
    }

    /** A bare futex wake-up between two processes: the floor under a sleeping getter's wake-up. */
    private static void futexFloor(Report report) throws Exception {
        String flagName = org.dtorch.core.shm.SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-futex";
        org.dtorch.core.shm.SharedRegion.unlink(flagName);
        int iterations = 1_000;
        Samples futex = new Samples("bare futex, 2 processes", iterations);
        try (org.dtorch.core.shm.SharedRegion flags = org.dtorch.core.shm.SharedRegion.create(flagName, 4096).orElseThrow();
             Peer peer = Peer.start("futex", flagName, "-", iterations)) {
            peer.awaitLine("READY");
            var seg = flags.segment();
            for (int i = 1; i <= iterations; i++) {
                org.dtorch.core.shm.Shm.putIntRelease(seg, 4, i);
                while (org.dtorch.core.shm.Shm.getIntAcquire(seg, 16) != i) {
                    org.dtorch.core.shm.Futex.await(seg, 16, i - 1, 1_000_000_000L);
                }
                futex.add(System.nanoTime() - seg.get(ValueLayout.JAVA_LONG, 8));
            }
        } finally {
            org.dtorch.core.shm.SharedRegion.unlink(flagName);
        }
        Samples threads = memoryWakeup(iterations, 2000);
        report.row("bare futex wake-up between two processes (the floor), waiter asleep 2 ms", futex, threads, "(reference)");
    }

    private static Samples memoryWakeup(int iterations, long delayMicros) throws Exception {
        Samples samples = new Samples("MEMORY promise, threads", iterations);
        try (Tensor value = longs()) {
            LongPointer first = new LongPointer(value.data_ptr());
            for (int i = 0; i < iterations; i++) {
                TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
                TensorFuture future = promise.getFuture();
                java.util.concurrent.atomic.AtomicBoolean entering = new java.util.concurrent.atomic.AtomicBoolean();
                Thread setter = Thread.ofPlatform().start(() -> {
                    while (!entering.get()) {
                        Thread.onSpinWait();
                    }
                    long until = System.nanoTime() + delayMicros * 1000;
                    if (delayMicros >= 500) {
                        java.util.concurrent.locks.LockSupport.parkNanos(delayMicros * 1000);
                    }
                    while (System.nanoTime() < until) {
                        Thread.onSpinWait();
                    }
                    first.put(0, System.nanoTime());
                    promise.setValue(value);
                });
                entering.set(true);
                try (Tensor got = future.get()) {
                    samples.add(System.nanoTime() - new LongPointer(got.data_ptr()).get(0));
                }
                setter.join();
            }
        }
        return samples;
    }

    // ---- blocked waiters ----------------------------------------------------------------------------------

    private static void blockedWaiters(Report report) throws Exception {
        String instance = GlobalCommInstanceId.next();
        String key = "bench/idle";
        long waitMillis = 10_000;
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        try (Peer peer = Peer.start("idle", instance, key, (int) waitMillis + 3_000);
             TensorStore store = TensorStore.create(info(instance, key).toBuilder().timeout(Duration.ofMillis(waitMillis)).build())) {
            peer.awaitLine("READY");
            AtomicLong storeCpu = new AtomicLong();
            AtomicLong promiseCpu = new AtomicLong();
            TensorPromise promise = TensorPromises.create(TensorPromiseType.FILE);
            TensorFuture future = promise.getFuture();
            Thread storeWaiter = Thread.ofPlatform().start(() -> {
                long start = threads.getCurrentThreadCpuTime();
                try {
                    store.destGet("never", CPU);
                } catch (CommTimeoutException expected) {
                    storeCpu.set(threads.getCurrentThreadCpuTime() - start);
                }
            });
            Thread promiseWaiter = Thread.ofPlatform().start(() -> {
                long start = threads.getCurrentThreadCpuTime();
                future.waitFor(Duration.ofMillis(waitMillis));
                promiseCpu.set(threads.getCurrentThreadCpuTime() - start);
            });
            long processStart = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
            storeWaiter.join();
            promiseWaiter.join();
            long processCpu = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime()
                - processStart;
            report.note(String.format(Locale.ROOT, "Blocked waiters over %d s (goal: under 1%% of a core each): a `destGet` on a "
                    + "File store shared with another JVM used %s of CPU (%.3f%% of a core); a File future's `waitFor` used %s (%.3f%%). "
                    + "The whole benchmark JVM used %s meanwhile (JIT and GC threads included).",
                waitMillis / 1000, Samples.format(storeCpu.get()), 100.0 * storeCpu.get() / (waitMillis * 1e6),
                Samples.format(promiseCpu.get()), 100.0 * promiseCpu.get() / (waitMillis * 1e6), Samples.format(processCpu)));
            store.barrier();
        }
    }

    // ---- per operator -------------------------------------------------------------------------------------

    private static void perOperator(Report report) {
        int rounds = Integer.getInteger("bench.rounds", 6) * 2;
        Samples processes = pipeline(true, rounds);
        Samples threads = pipeline(false, rounds);
        report.row("add, shape (1,), per operator", processes, threads, "(overhead of process mode)");
    }

    private static Samples pipeline(boolean processes, int rounds) {
        int perRound = 20_000;
        Samples samples = new Samples(processes ? "process mode" : "thread mode", rounds);
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).perDevicePerProcess(processes).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            DTensor a = dt.ones(new long[] {1}, mesh);
            DTensor b = dt.ones(new long[] {1}, mesh);
            dt.sync();
            for (int round = -2; round < rounds; round++) {
                long start = System.nanoTime();
                for (int i = 0; i < perRound; i++) {
                    a.add(b).close();
                }
                dt.sync();
                if (round >= 0) {
                    samples.add((System.nanoTime() - start) / perRound);
                }
            }
        }
        return samples;
    }

    // ---- helpers ------------------------------------------------------------------------------------------

    private static Tensor longs() {
        return torch.zeros(new long[] {128}, new org.bytedeco.pytorch.TensorOptions().dtype(
            new org.bytedeco.pytorch.ScalarTypeOptional(torch.ScalarType.Long)));
    }

    private static TensorStoreCreateInfo info(String instance, String key) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key).worldSize(2).rank(0)
            .timeout(Duration.ofSeconds(120)).build();
    }

    private static TensorStoreCreateInfo memoryInfo(String key, int rank) {
        return TensorStoreCreateInfo.builder().storeKey(key).worldSize(2).rank(rank).timeout(Duration.ofSeconds(60)).build();
    }

    /** The peer JVM: its stdout for {@code READY} and samples. */
    private static final class Peer implements AutoCloseable {
        private final Process process;
        private final BufferedReader out;

        private Peer(Process process) {
            this.process = process;
            this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        }

        static Peer start(String mode, String instance, String key, int n) throws IOException {
            ProcessBuilder builder = JvmCommand.of(ProcessBenchPeer.class.getName(), List.of(mode, instance, key, String.valueOf(n)),
                Map.of(), List.of("-Xmx2g")).processBuilder();
            builder.redirectError(ProcessBuilder.Redirect.INHERIT);
            return new Peer(builder.start());
        }

        void awaitLine(String expected) throws IOException {
            for (String line; (line = out.readLine()) != null; ) {
                if (line.startsWith(expected)) {
                    return;
                }
            }
            throw new IllegalStateException("the peer exited before printing " + expected);
        }

        Samples samples(String name, int count) throws IOException {
            for (String line; (line = out.readLine()) != null; ) {
                if (line.startsWith("SAMPLES")) {
                    String[] parts = line.substring(8).trim().split(" ");
                    Samples samples = new Samples(name, parts.length);
                    for (int i = Math.min(parts.length, count / 10); i < parts.length; i++) { // the first tenth warms up
                        samples.add(Long.parseLong(parts[i]));
                    }
                    return samples;
                }
            }
            throw new IllegalStateException("the peer exited before printing its samples");
        }

        @Override
        public void close() throws Exception {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }
}
