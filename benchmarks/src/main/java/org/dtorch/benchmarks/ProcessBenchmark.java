package org.dtorch.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * Per-device-process mode: the File store and promises between this JVM and a peer JVM
 * ({@link ProcessBenchPeer}), a blocked waiter's CPU use, and the per-operator cost of process mode
 * against thread mode. One peer serves all runs of a measurement; each variant has its own tensors.
 */
final class ProcessBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long BIG = 256L * 1024 * 1024;
    private static final int HANDOFFS = 20_000;
    private static final int OPS_PER_ROUND = 20_000;
    /** Spinning-getter hand-offs that warm the File promise's paths before the sleeping-getter samples. */
    private static final int WARMUP_HANDOFFS = 20_000;
    /** The value the {@code promise} peer sets: 128 int64 (1 KiB); see {@link ProcessBenchPeer}. */
    private static final ExpectedValue PEER_VALUE = new ExpectedValue(new long[] {128}, torch.ScalarType.Long);
    private static final long IDLE_MILLIS = 10_000;

    private ProcessBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(BIG);
        report.section("File store between two processes", "process",
            "This JVM produces, a second JVM consumes, over `/dev/shm` with futex waits. Large: the producer's `srcSet` to its "
                + "`srcWaitUntilGetFinished` returning, " + exchanges(options) + " exchanges per run after 2 of warm-up (the producer copies "
                + "the tensor into shared memory once; the consumer gets a view); baseline: a single-threaded `MemorySegment.copy` of the "
                + "same size between pre-faulted buffers. Small: the producer's `srcSet` to the consumer's `destGet` returning, read from "
                + "the producer's clock value inside the tensor (`System.nanoTime` is the system's monotonic clock, shared by the "
                + "processes), " + Unit.count(options.iterations(HANDOFFS)) + " hand-offs per run after a warm-up block; baseline: the same between "
                + "two threads through the memory store.");
        String instance = GlobalCommInstanceId.next();
        Figure[] bandwidth = {new Figure("exchange bandwidth, " + Unit.size(bytes) + " copied once into shared memory",
            Unit.GIGABYTES_PER_SECOND, Goal.context("context")),
            new Figure("single-threaded memcpy bandwidth, " + Unit.size(bytes), Unit.GIGABYTES_PER_SECOND, Goal.context("context"))};
        List<Comparison> rows = new ArrayList<>(exchange(options, instance, bytes, bandwidth));
        rows.add(handoff(options, instance));
        report.comparisons(rows);
        report.figures(List.of(bandwidth));

        report.section("File promise wake-up across processes", "process",
            "A peer JVM completes a File promise while this JVM is blocked in `get()`; latency from the peer's clock just before "
                + "`setValue` to `get()` returning; requests pass through shared memory only. The peer waits until the getter is inside "
                + "`get()`, then 20 us (the getter is still in its 50 us spin) or 2 ms (it sleeps on the futex). Baseline: a MEMORY "
                + "promise set by another thread of this JVM after the same delay. Reference: a bare futex wake-up between two "
                + "processes, nothing else, against the same thread baseline. Per run " + Unit.count(options.iterations(5_000)) + " (20 us) and "
                + Unit.count(options.iterations(1_000)) + " (2 ms) wake-ups, " + Unit.count(Math.min(200, options.iterations(1_000)))
                + " more of warm-up in the first run; " + Unit.count(options.iterations(1_000)) + " bare futex wake-ups.");
        List<Comparison> wakeups = new ArrayList<>(promiseWakeup(options));
        wakeups.add(futexFloor(options));
        report.comparisons(wakeups);

        long idleMillis = options.quick() ? IDLE_MILLIS / 5 : IDLE_MILLIS;
        report.section("A blocked waiter", "process",
            "CPU time of a thread blocked for " + idleMillis / 1000 + " s in a `destGet` on a File store shared with another JVM (the "
                + "value never comes; the wait ends at its deadline), and of a thread in a File future's `waitFor`, as a share of one "
                + "core.");
        report.figures(blockedWaiters(options, idleMillis));

        report.section("Per operator: process mode against thread mode (one device)", "process",
            "Mean time per `add` of shape (1,) over rounds of " + Unit.count(options.iterations(OPS_PER_ROUND)) + ", results dropped, then `sync()`; "
                + options.rounds() * 2 + " rounds per run after 2 of warm-up, a fresh runtime per run and mode. Measured: the device is a "
                + "worker process; baseline: the device is a worker thread.");
        report.comparisons(List.of(perOperator(options).inArea(DocsTable.PER_OPERATOR)));
    }

    private static int exchanges(BenchOptions options) {
        return options.rounds() * 3;
    }

    // ---- large exchange ----------------------------------------------------------------------------------

    /** The two large-exchange rows; fills the bandwidth figures (exchange, memcpy) per run. */
    private static List<Comparison> exchange(BenchOptions options, String instance, long bytes, Figure[] bandwidth) throws Exception {
        int iterations = exchanges(options);
        String key = "bench/exchange";
        Comparison copiedRow = new Comparison(Unit.size(bytes) + " float32, copied once into shared memory",
            new Goal("at least 0.8x copy bandwidth (ratio >= 0.8)", Goal.Target.RATIO, r -> r >= 0.8));
        Comparison allocatedRow = new Comparison(Unit.size(bytes) + " float32 made by `store.allocate` (no copy)",
            Goal.context("zero-copy path"));
        int perRun = 2 * (iterations + 2);
        try (PeerJvm peer = PeerJvm.start("consume", instance, key, options.runs() * perRun, 1);
             TensorStore store = TensorStore.create(info(instance, key));
             Tensor value = torch.rand(new long[] {bytes / 4});
             Tensor shared = store.allocate(new long[] {bytes / 4}, torch.ScalarType.Float);
             Arena arena = Arena.ofConfined()) {
            peer.awaitLine("READY");
            shared.copy_(value);
            MemorySegment src = arena.allocate(bytes, 64);
            MemorySegment dst = arena.allocate(bytes, 64);
            src.fill((byte) 1);
            dst.fill((byte) 0);
            for (int run = 0; run < options.runs(); run++) {
                Samples memcpy = memcpy(src, dst, iterations);
                Samples copied = exchangeRun(store, value, "FileTensorStore, copied", iterations);
                Samples allocated = exchangeRun(store, shared, "FileTensorStore, allocated", iterations);
                copiedRow.add(copied, memcpy);
                allocatedRow.add(allocated, memcpy);
                bandwidth[0].add(bytes / (double) copied.p50());
                bandwidth[1].add(bytes / (double) memcpy.p50());
            }
            store.barrier();
        }
        return List.of(copiedRow, allocatedRow);
    }

    private static Samples exchangeRun(TensorStore store, Tensor value, String name, int iterations) {
        Samples samples = new Samples(name);
        for (int i = -2; i < iterations; i++) {
            long start = System.nanoTime();
            store.srcSet("x", value, CPU, 1);
            store.srcWaitUntilGetFinished("x", CPU);
            if (i >= 0) {
                samples.add(System.nanoTime() - start);
            }
        }
        return samples;
    }

    private static Samples memcpy(MemorySegment src, MemorySegment dst, int iterations) {
        Samples samples = new Samples("single-threaded memcpy");
        for (int i = -2; i < iterations; i++) {
            long start = System.nanoTime();
            MemorySegment.copy(src, ValueLayout.JAVA_BYTE, 0, dst, ValueLayout.JAVA_BYTE, 0, src.byteSize());
            if (i >= 0) {
                samples.add(System.nanoTime() - start);
            }
        }
        return samples;
    }

    // ---- small hand-off -----------------------------------------------------------------------------------

    private static Comparison handoff(BenchOptions options, String instance) throws Exception {
        int iterations = options.iterations(HANDOFFS);
        String key = "bench/latency";
        Comparison row = new Comparison("1 KiB int64 hand-off", Goal.p50AtMost(20_000));
        List<Samples> crossProcess = new ArrayList<>();
        try (PeerJvm peer = PeerJvm.start("latency", instance, key, iterations, options.runs() + 1);
             TensorStore store = TensorStore.create(info(instance, key));
             Tensor value = longs()) {
            peer.awaitLine("READY");
            LongPointer first = new LongPointer(value.data_ptr());
            for (int block = 0; block <= options.runs(); block++) { // block 0 warms up
                for (int i = 0; i < iterations; i++) {
                    first.put(0, System.nanoTime());
                    store.srcSet("x", value, CPU, 1);
                    store.srcWaitUntilGetFinished("x", CPU);
                }
                Samples samples = peer.samples("FileTensorStore, 2 processes");
                if (block > 0) {
                    crossProcess.add(samples);
                }
            }
            store.barrier();
        }
        threadHandoff(iterations); // warm-up
        for (Samples samples : crossProcess) {
            row.add(samples, threadHandoff(iterations));
        }
        return row;
    }

    private static Samples threadHandoff(int iterations) throws Exception {
        String key = "bench/thread-latency-" + System.nanoTime();
        TensorStore[] stores = new TensorStore[2];
        Thread creator = Thread.ofPlatform().start(() -> stores[1] = TensorStore.create(memoryInfo(key, 1)));
        stores[0] = TensorStore.create(memoryInfo(key, 0));
        creator.join();
        Samples samples = new Samples("memory store, threads");
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
        } finally {
            stores[0].close();
            stores[1].close();
        }
        return samples;
    }

    // ---- promise wake-up ----------------------------------------------------------------------------------

    /**
     * The flag region shared with the {@code promise} peer (see {@link ProcessBenchPeer}):
     * <pre>
     *   0  int  the peer: request i attached      8  int  request i (futex the peer sleeps on; -1: done)
     *   4  int  the getter: entering get() for i  12 int  the setter's delay, us
     *   64 ..   the promise's serialized name
     * </pre>
     */
    private static List<Comparison> promiseWakeup(BenchOptions options) throws Exception {
        String flagName = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-flags";
        SharedRegion.unlink(flagName);
        long[] delays = {20, 2000};
        List<Comparison> rows = List.of(
            new Comparison("getter still spinning (setter waits 20 us)", Goal.p50AtMost(30_000)),
            new Comparison("getter asleep in the futex (setter waits 2 ms)", Goal.p50AtMost(30_000)));
        try (SharedRegion flags = SharedRegion.create(flagName, 4096).orElseThrow();
             PeerJvm peer = PeerJvm.start("promise", flagName, "-", 0, 1)) {
            peer.awaitLine("READY");
            MemorySegment seg = flags.segment();
            int[] sequence = {0};
            for (int run = 0; run < options.runs(); run++) {
                for (int d = 0; d < delays.length; d++) {
                    int iterations = options.iterations(delays[d] < 100 ? 5_000 : 1_000);
                    Samples file = filePromiseRun(seg, sequence, delays[d], iterations, run == 0 ? Math.min(200, iterations) : 0);
                    rows.get(d).add(file, memoryWakeup(iterations, delays[d]));
                }
            }
            Shm.putIntRelease(seg, 8, -1);
            Futex.wakeAll(seg, 8);
        } finally {
            SharedRegion.unlink(flagName);
        }
        return rows;
    }

    private static Samples filePromiseRun(MemorySegment seg, int[] sequence, long delayMicros, int iterations, int warmup) {
        return filePromiseRun(seg, sequence, delayMicros, iterations, warmup, true);
    }

    /**
     * {@code iterations} hand-offs of the peer's 1 KiB int64 value through File promises; {@code expected}: the promise
     * is made with the value's shape and dtype, as a runtime's {@code get_tensor} makes it, so the getter allocates before
     * it sleeps.
     */
    private static Samples filePromiseRun(MemorySegment seg, int[] sequence, long delayMicros, int iterations, int warmup,
        boolean expected) {
        Samples file = new Samples(expected ? "FILE promise" : "FILE promise, shape not given");
        for (int i = -warmup; i < iterations; i++) {
            TensorPromise promise = TensorPromises.create(TensorPromiseType.FILE, null, expected ? PEER_VALUE : null);
            TensorFuture future = promise.getFuture();
            int n = ++sequence[0];
            Shm.putString(seg, 64, 1024, promise.serialize());
            seg.set(ValueLayout.JAVA_INT, 12, (int) delayMicros);
            Shm.putIntRelease(seg, 8, n); // request n
            Futex.wakeAll(seg, 8);
            while (Shm.getIntAcquire(seg, 0) != n) {
                Thread.onSpinWait();
            }
            Shm.putIntRelease(seg, 4, n); // entering get()
            try (Tensor got = future.get()) {
                long returned = System.nanoTime(); // before reading the clock value: that takes JavaCPP calls of its own
                if (i >= 0) {
                    file.add(returned - new LongPointer(got.data_ptr()).get(0));
                }
            }
        }
        return file;
    }

    /**
     * A bare futex wake-up between two processes: the floor under a sleeping getter's wake-up. Flag region:
     * word 4, the waiter's request i; long 8, the peer's clock before the wake; word 16, the futex (i once woken).
     */
    private static Comparison futexFloor(BenchOptions options) throws Exception {
        String flagName = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-futex";
        SharedRegion.unlink(flagName);
        int iterations = options.iterations(1_000);
        Comparison row = new Comparison("bare futex wake-up, 2 processes, waiter asleep 2 ms (reference)", Goal.context("reference"));
        try (SharedRegion flags = SharedRegion.create(flagName, 4096).orElseThrow();
             PeerJvm peer = PeerJvm.start("futex", flagName, "-", iterations * options.runs(), 1)) {
            peer.awaitLine("READY");
            MemorySegment seg = flags.segment();
            int[] sequence = {0};
            for (int run = 0; run < options.runs(); run++) {
                row.add(futexRun(seg, sequence, iterations), memoryWakeup(iterations, 2000));
            }
        } finally {
            SharedRegion.unlink(flagName);
        }
        return row;
    }

    /** {@code iterations} bare futex wake-ups from the {@code futex} peer, whose flag region is {@code seg}. */
    private static Samples futexRun(MemorySegment seg, int[] sequence, int iterations) {
        Samples futex = new Samples("bare futex, 2 processes");
        for (int k = 0; k < iterations; k++) {
            int i = ++sequence[0];
            Shm.putIntRelease(seg, 4, i);
            while (Shm.getIntAcquire(seg, 16) != i) {
                Futex.await(seg, 16, i - 1, 1_000_000_000L);
            }
            futex.add(System.nanoTime() - seg.get(ValueLayout.JAVA_LONG, 8));
        }
        return futex;
    }

    /**
     * A File promise whose getter sleeps in the futex (the peer sets it 2 ms after the getter entered {@code get()})
     * against a bare futex wake-up between two processes after the same 2 ms, run by run in the same JVMs: the
     * promise's cost over the kernel's wake-up. Goal: within 1.1x.
     */
    static List<Comparison> sleepingPromiseAgainstFutex(BenchOptions options) throws Exception {
        String promiseFlags = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-speed-flags";
        String futexFlags = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-speed-futex";
        SharedRegion.unlink(promiseFlags);
        SharedRegion.unlink(futexFlags);
        int iterations = options.iterations(1_000);
        Comparison row = new Comparison("File promise, getter asleep in the futex 2 ms", new Goal("within 1.1x (ratio >= 0.91)",
            Goal.Target.RATIO, r -> r >= 1 / 1.1));
        Comparison unknownShape = new Comparison("File promise, getter asleep 2 ms, the value's shape not given (secondary)",
            Goal.context("secondary: no allocation before the sleep"));
        try (SharedRegion promiseRegion = SharedRegion.create(promiseFlags, 4096).orElseThrow();
             SharedRegion futexRegion = SharedRegion.create(futexFlags, 4096).orElseThrow();
             PeerJvm promisePeer = PeerJvm.start("promise", promiseFlags, "-", 0, 1);
             PeerJvm futexPeer = PeerJvm.start("futex", futexFlags, "-", iterations * options.runs(), 1)) {
            promisePeer.awaitLine("READY");
            futexPeer.awaitLine("READY");
            MemorySegment promiseSeg = promiseRegion.segment();
            int[] promiseSequence = {0};
            int[] futexSequence = {0};
            // Warm both JVMs' paths up to the JIT's top tier with cheap hand-offs (the getter still spinning): the
            // 2 ms samples alone are too few, and interpreted setValue and get() cost tens of microseconds.
            filePromiseRun(promiseSeg, promiseSequence, 20, options.iterations(WARMUP_HANDOFFS), 0);
            for (int run = 0; run < options.runs(); run++) {
                Samples file = filePromiseRun(promiseSeg, promiseSequence, 2000, iterations, run == 0 ? Math.min(200, iterations) : 0);
                Samples futex = futexRun(futexRegion.segment(), futexSequence, iterations);
                row.add(file, futex);
                unknownShape.add(filePromiseRun(promiseSeg, promiseSequence, 2000, iterations, 0, false), futex);
            }
            Shm.putIntRelease(promiseSeg, 8, -1);
            Futex.wakeAll(promiseSeg, 8);
        } finally {
            SharedRegion.unlink(promiseFlags);
            SharedRegion.unlink(futexFlags);
        }
        return List.of(row, unknownShape);
    }

    private static Samples memoryWakeup(int iterations, long delayMicros) throws Exception {
        Samples samples = new Samples("MEMORY promise, threads");
        try (Tensor value = longs()) {
            LongPointer first = new LongPointer(value.data_ptr());
            for (int i = 0; i < iterations; i++) {
                TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
                TensorFuture future = promise.getFuture();
                AtomicBoolean entering = new AtomicBoolean();
                Thread setter = Thread.ofPlatform().start(() -> {
                    while (!entering.get()) {
                        Thread.onSpinWait();
                    }
                    long until = System.nanoTime() + delayMicros * 1000;
                    if (delayMicros >= 500) {
                        LockSupport.parkNanos(delayMicros * 1000);
                    }
                    while (System.nanoTime() < until) {
                        Thread.onSpinWait();
                    }
                    first.put(0, System.nanoTime());
                    promise.setValue(value);
                });
                entering.set(true);
                try (Tensor got = future.get()) {
                    long returned = System.nanoTime();
                    samples.add(returned - new LongPointer(got.data_ptr()).get(0));
                }
                setter.join();
            }
        }
        return samples;
    }

    // ---- blocked waiters ----------------------------------------------------------------------------------

    private static List<Figure> blockedWaiters(BenchOptions options, long waitMillis) throws Exception {
        String instance = GlobalCommInstanceId.next();
        String key = "bench/idle";
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        Figure storeShare = new Figure("`destGet` on a File store shared with another JVM, CPU share of a core", Unit.PERCENT,
            Goal.atMost(1, Unit.PERCENT));
        Figure promiseShare = new Figure("File future's `waitFor`, CPU share of a core", Unit.PERCENT, Goal.atMost(1, Unit.PERCENT));
        Figure processShare = new Figure("the whole benchmark JVM meanwhile (JIT, GC and the runtime's threads)", Unit.PERCENT,
            Goal.context("context"));
        // The peer stays 1 s past the waits (it must be alive while they run), less than the closing barrier's deadline.
        try (PeerJvm peer = PeerJvm.start("idle", instance, key, (int) waitMillis + 1_000, options.runs())) {
            peer.awaitLine("STARTED"); // the stores below wait only waitMillis for the peer to join
            for (int run = 0; run < options.runs(); run++) {
                try (TensorStore store = TensorStore.create(info(instance, key + "-" + run).toBuilder()
                    .timeout(Duration.ofMillis(waitMillis)).build())) {
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
                    long processStart = processCpuNanos();
                    storeWaiter.join();
                    promiseWaiter.join();
                    long processCpu = processCpuNanos() - processStart;
                    storeShare.add(100.0 * storeCpu.get() / (waitMillis * 1e6));
                    promiseShare.add(100.0 * promiseCpu.get() / (waitMillis * 1e6));
                    processShare.add(100.0 * processCpu / (waitMillis * 1e6));
                    store.barrier();
                }
            }
        }
        return List.of(storeShare, promiseShare, processShare);
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    // ---- per operator -------------------------------------------------------------------------------------

    private static Comparison perOperator(BenchOptions options) {
        int rounds = options.rounds() * 2;
        int perRound = options.iterations(OPS_PER_ROUND);
        Comparison row = new Comparison("add (1,), device is a worker process", Goal.context("overhead of process mode"));
        for (int run = 0; run < options.runs(); run++) {
            Samples processes = pipeline(true, rounds, perRound);
            Samples threads = pipeline(false, rounds, perRound);
            row.add(processes, threads);
        }
        return row;
    }

    private static Samples pipeline(boolean processes, int rounds, int perRound) {
        Samples samples = new Samples(processes ? "process mode" : "device is a worker thread");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(1).perDevicePerProcess(processes).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            try (DTensor a = dt.ones(new long[] {1}, mesh); DTensor b = dt.ones(new long[] {1}, mesh)) {
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
        }
        return samples;
    }

    // ---- helpers ------------------------------------------------------------------------------------------

    private static Tensor longs() {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(torch.ScalarType.Long))) {
            return torch.zeros(new long[] {128}, options);
        }
    }

    private static TensorStoreCreateInfo info(String instance, String key) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key).worldSize(2).rank(0)
            .timeout(Duration.ofSeconds(120)).build();
    }

    private static TensorStoreCreateInfo memoryInfo(String key, int rank) {
        return TensorStoreCreateInfo.builder().storeKey(key).worldSize(2).rank(rank).timeout(Duration.ofSeconds(60)).build();
    }
}
