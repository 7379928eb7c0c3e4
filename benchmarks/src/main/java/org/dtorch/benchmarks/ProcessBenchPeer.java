package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The other process of {@link ProcessBenchmark}: {@code ProcessBenchPeer <mode> <instance> <key> <n> <blocks>}.
 * <ul>
 *   <li>{@code consume}: rank 1 of a File store; takes and finishes key {@code x} {@code n} times.</li>
 *   <li>{@code latency}: the same, {@code blocks} times {@code n}, reading the producer's send time from element 0
 *       of each (int64) value; prints the latencies of each block ({@code SAMPLES ...}).</li>
 *   <li>{@code promise} (the instance argument names a flag region): takes requests from the flag region; once
 *       the getter is in {@code get()}, waits the delay, then sets the promise to an int64 tensor whose element 0
 *       is the time just before {@code setValue}.</li>
 *   <li>{@code idle}: prints {@code STARTED} once loaded, then {@code blocks} times joins the store
 *       {@code <key>-<block>} and waits {@code n} ms without setting anything.</li>
 * </ul>
 * {@link System#nanoTime()} is the system's monotonic clock, the same in every process of the host.
 *
 * <p>Thread-safe: stateless; {@code main} runs one mode on its thread.
 */
public final class ProcessBenchPeer {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));

    private ProcessBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int n = Integer.parseInt(args[3]);
        int blocks = Integer.parseInt(args[4]);
        if (mode.equals("promise")) {
            promises(args[1]);
            System.exit(0);
        }
        if (mode.equals("futex")) {
            futexes(args[1], n);
            System.exit(0);
        }
        if (mode.equals("idle")) {
            torch.zeros(1).close(); // load libtorch before saying so: the other side's store deadline is short
            System.out.println("STARTED");
            for (int block = 0; block < blocks; block++) {
                try (TensorStore store = TensorStore.create(info(args[1], args[2] + "-" + block))) {
                    System.out.println("READY");
                    Thread.sleep(n);
                    store.barrier();
                }
            }
            System.exit(0);
        }
        try (TensorStore store = TensorStore.create(info(args[1], args[2]))) {
            System.out.println("READY");
            switch (mode) {
                case "consume" -> {
                    for (int i = 0; i < n; i++) {
                        store.destGet("x", CPU).close();
                        store.destFinishGet("x", CPU);
                    }
                }
                case "latency" -> {
                    for (int block = 0; block < blocks; block++) {
                        consumeTimed(store, n);
                    }
                }
                default -> throw new IllegalArgumentException("unknown peer mode: " + mode);
            }
            store.barrier();
        }
        System.exit(0);
    }

    /**
     * Takes and finishes key {@code x} of {@code store} {@code n} times, reading the producer's send time from the first
     * 8 bytes of each value, and prints the latencies ({@code SAMPLES ...}).
     */
    static void consumeTimed(TensorStore store, int n) {
        StringBuilder samples = new StringBuilder("SAMPLES");
        for (int i = 0; i < n; i++) {
            try (Tensor got = store.destGet("x", CPU)) {
                long sent = new LongPointer(got.data_ptr()).get(0);
                samples.append(' ').append(System.nanoTime() - sent);
            }
            store.destFinishGet("x", CPU);
        }
        System.out.println(samples);
    }

    private static TensorStoreCreateInfo info(String instance, String key) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key).worldSize(2).rank(1)
            .timeout(Duration.ofSeconds(120)).build();
    }

    /**
     * The floor under the promise wake-up: {@code n} times, once the waiter publishes {@code i} in word 4 of the
     * flag region, wait 2 ms, store the time at offset 8, store {@code i} in word 16 and wake its futex.
     */
    private static void futexes(String flagName, int n) throws Exception {
        try (SharedRegion flags = SharedRegion.open(flagName).orElseThrow()) {
            System.out.println("READY");
            var seg = flags.segment();
            for (int i = 1; i <= n; i++) {
                while (Shm.getIntAcquire(seg, 4) != i) {
                    Thread.onSpinWait();
                }
                LockSupport.parkNanos(2_000_000);
                seg.set(java.lang.foreign.ValueLayout.JAVA_LONG, 8, System.nanoTime());
                Shm.putIntRelease(seg, 16, i);
                org.dtorch.core.shm.Futex.wakeAll(seg, 16);
            }
        }
    }

    /**
     * For each request {@code i} the getter publishes in the flag region (word 8: {@code i}, a futex the peer
     * sleeps on; word 12: the delay in us; from offset 64: the promise's name): attach, acknowledge in word 0,
     * wait until the getter publishes {@code i} in word 4 (it is entering {@code get()}), wait the delay, set.
     * Only shared memory passes between the processes: a pipe makes the scheduler pair its two ends up on one
     * CPU, which is not what a runtime's worker and client do.
     */
    private static void promises(String flagName) throws Exception {
        try (SharedRegion flags = SharedRegion.open(flagName).orElseThrow();
             Tensor value = torch.zeros(new long[] {128}, new org.bytedeco.pytorch.TensorOptions().dtype(
                 new org.bytedeco.pytorch.ScalarTypeOptional(torch.ScalarType.Long)))) {
            System.out.println("READY");
            var seg = flags.segment();
            LongPointer first = new LongPointer(value.data_ptr());
            for (int i = 1; ; i++) {
                int request;
                while ((request = Shm.getIntAcquire(seg, 8)) != i && request >= 0) {
                    org.dtorch.core.shm.Futex.await(seg, 8, request, 1_000_000_000L);
                }
                if (request < 0) {
                    return; // the getter is done
                }
                TensorPromise promise = TensorPromises.fromSerialized(TensorPromiseType.FILE, Shm.getString(seg, 64));
                long delayNanos = seg.get(java.lang.foreign.ValueLayout.JAVA_INT, 12) * 1000L;
                Shm.putIntRelease(seg, 0, i);
                while (Shm.getIntAcquire(seg, 4) != i) {
                    Thread.onSpinWait();
                }
                long until = System.nanoTime() + delayNanos;
                if (delayNanos >= 500_000) {
                    LockSupport.parkNanos(delayNanos);
                }
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                first.put(0, System.nanoTime());
                promise.setValue(value);
            }
        }
    }
}
