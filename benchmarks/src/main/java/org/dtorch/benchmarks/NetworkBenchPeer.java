package org.dtorch.benchmarks;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;

/**
 * The other "node" of {@link NetworkSmallBenchmark}: {@code NetworkBenchPeer <rendezvous> <instance> <key>}, started
 * with a host identity of its own. It joins, as rank 1, the Network store {@code <key>/network} (picked by
 * {@link TensorStore#createForParticipants}: the harness is another host) and the File store {@code <key>/file} of
 * File instance {@code instance}, prints {@code READY <backend>}, then takes commands on its standard input:
 * <ul>
 *   <li>{@code CONSUME <network|file> <n>}: takes and finishes key {@code x} {@code n} times, reading the producer's
 *       {@link System#nanoTime()} from the first 8 bytes of each value; prints the latencies ({@code SAMPLES ...}).</li>
 *   <li>{@code PROMISE <NETWORK|FILE> <serialized>}: attaches to the promise, waits {@value #SET_DELAY_MICROS} us (the
 *       getter is asleep in {@code get()} by then), and sets it to a 1 KiB int64 value whose element 0 is the time just
 *       before {@code setValue}.</li>
 *   <li>{@code END}: a barrier on both stores, then exits.</li>
 * </ul>
 *
 * <p>Thread-safe: stateless; {@code main} runs on one thread.
 */
public final class NetworkBenchPeer {
    /** How long the setter waits before completing a promise. */
    static final long SET_DELAY_MICROS = 2_000;
    /** The value a promise is set to: 128 int64. */
    static final long PROMISE_ELEMENTS = 128;
    static final Duration TIMEOUT = Duration.ofSeconds(120);

    private NetworkBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        RendezvousAddress rendezvous = RendezvousAddress.parse(args[0]);
        try (TensorStore network = TensorStore.createForParticipants(networkInfo(rendezvous, args[2], 1).build());
             TensorStore file = TensorStore.create(fileInfo(args[1], args[2], 1));
             Tensor value = torch.zeros(new long[] {PROMISE_ELEMENTS}, new org.bytedeco.pytorch.TensorOptions().dtype(
                 new org.bytedeco.pytorch.ScalarTypeOptional(torch.ScalarType.Long)))) {
            System.out.println("READY " + network.type());
            BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = commands.readLine()) != null && !line.equals("END"); ) {
                String[] words = line.split(" ");
                switch (words[0]) {
                    case "CONSUME" -> ProcessBenchPeer.consumeTimed(words[1].equals("network") ? network : file, Integer.parseInt(words[2]));
                    case "PROMISE" -> complete(TensorPromises.fromSerialized(TensorPromiseType.valueOf(words[1]), words[2]), value);
                    default -> throw new IllegalArgumentException("unknown command: " + line);
                }
            }
            network.barrier();
            file.barrier();
        }
        System.exit(0);
    }

    /** Rank {@code rank}'s creation info of the Network store under {@code key}; the host identity is the caller's. */
    static TensorStoreCreateInfo.Builder networkInfo(RendezvousAddress rendezvous, String key, int rank) {
        return TensorStoreCreateInfo.builder().rendezvous(rendezvous).storeKey(key + "/network").worldSize(2).rank(rank).timeout(TIMEOUT);
    }

    /** Rank {@code rank}'s creation info of the File store under {@code key}. */
    static TensorStoreCreateInfo fileInfo(String instance, String key, int rank) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key + "/file").worldSize(2).rank(rank)
            .timeout(TIMEOUT).build();
    }

    private static void complete(TensorPromise promise, Tensor value) {
        LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(SET_DELAY_MICROS));
        new LongPointer(value.data_ptr()).put(0, System.nanoTime());
        promise.setValue(value);
    }
}
