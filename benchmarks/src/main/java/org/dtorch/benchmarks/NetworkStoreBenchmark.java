package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * The Network store against c10d Gloo called directly: one value of 256 MiB from a producer to one consumer on
 * loopback, each a host of its own ({@code node-0}, {@code node-1}), so that the store moves it as between hosts (its
 * c10d {@code TCPStore} bookkeeping, a take request, one Gloo send and receive). Measured: the producer's
 * {@code srcSet} to the consumer's {@code destGet} returning, the whole four-step handshake per iteration (a new
 * tensor per take, as the store returns). Baseline: {@code ProcessGroupGloo.send} to {@code recv} of the same bytes
 * between two ranks of a group of their own over the same rendezvous, into a buffer allocated once (the strongest
 * form). Both ranks are threads of this JVM, as in the store's own thread test; they share the process's Gloo device
 * (one TCP event loop) in both rows.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class NetworkStoreBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long FULL_BYTES = 256L * 1024 * 1024;
    private static final Duration TIMEOUT = Duration.ofSeconds(300);

    private NetworkStoreBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(FULL_BYTES);
        int iterations = options.iterations(8);
        report.section("NetworkTensorStore: " + Unit.size(bytes) + " between two hosts on loopback", "network",
            "Producer `srcSet` to consumer `destGet` returning, the whole four-step handshake per iteration, two ranks with host "
                + "identities of their own (threads of one JVM; the bytes go through Gloo's TCP on 127.0.0.1); baseline: "
                + "`ProcessGroupGloo.send` to `recv` of the same bytes between the same two ranks, into a buffer allocated once. "
                + "Per run " + iterations + " transfers each, interleaved, after one warm-up transfer of each.");
        Comparison row = new Comparison(Unit.size(bytes) + " float32, Network store vs Gloo send/recv", Goal.ratioAtLeast(0.9));
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0); RankPool pool = new RankPool(2);
             Tensor value = torch.ones(bytes / 4); Tensor received = torch.empty(bytes / 4)) {
            String key = "bench/network-" + System.nanoTime();
            List<TensorStore> stores = pool.onRanks(rank -> TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK)
                .rendezvous(server.address()).hostId("node-" + rank).storeKey(key).worldSize(2).rank(rank).timeout(TIMEOUT).build()));
            List<ProcessGroupGloo> gloo = pool.onRanks(rank -> glooGroup(server, key, rank));
            try {
                storeTransfers(stores, value, 1);
                glooTransfers(gloo, value, received, 1);
                for (int run = 0; run < options.runs(); run++) {
                    Samples store = new Samples("NetworkTensorStore");
                    Samples direct = new Samples("Gloo send/recv");
                    for (int i = 0; i < iterations; i++) {
                        store.add(storeTransfers(stores, value, 1)[0]);
                        direct.add(glooTransfers(gloo, value, received, 1)[0]);
                    }
                    row.add(store, direct);
                }
            } finally {
                stores.forEach(TensorStore::close);
                gloo.forEach(ProcessGroupGloo::close);
            }
        }
        report.comparisons(List.of(row));
    }

    /** {@code n} hand-offs through the store; each time is srcSet's start to destGet's return, on one clock. */
    private static long[] storeTransfers(List<TensorStore> stores, Tensor value, int n) throws Exception {
        long[] sent = new long[n];
        long[] took = new long[n];
        Thread consumer = Thread.ofPlatform().start(() -> {
            for (int i = 0; i < n; i++) {
                try (Tensor got = stores.get(1).destGet("x", CPU)) {
                    took[i] = System.nanoTime() - sent[i];
                }
                stores.get(1).destFinishGet("x", CPU);
            }
        });
        for (int i = 0; i < n; i++) {
            sent[i] = System.nanoTime();
            stores.get(0).srcSet("x", value, CPU, 1);
            stores.get(0).srcWaitUntilGetFinished("x", CPU);
        }
        consumer.join();
        return took;
    }

    /** {@code n} sends and receives between the two ranks; each time is the send's start to the receive's completion. */
    private static long[] glooTransfers(List<ProcessGroupGloo> gloo, Tensor value, Tensor received, int n) throws Exception {
        long[] sent = new long[n];
        long[] took = new long[n];
        Thread consumer = Thread.ofPlatform().start(() -> {
            for (int i = 0; i < n; i++) {
                try (TensorVector one = new TensorVector(received); Work work = gloo.get(1).recv(one, 0, 0)) {
                    work._wait();
                    took[i] = System.nanoTime() - sent[i];
                }
            }
        });
        for (int i = 0; i < n; i++) {
            sent[i] = System.nanoTime();
            try (TensorVector one = new TensorVector(value); Work work = gloo.get(0).send(one, 1, 0)) {
                work._wait();
            }
        }
        consumer.join();
        return took;
    }

    /** Rank {@code rank} of a Gloo group of two over the benchmark's rendezvous; the group owns its stores. */
    private static ProcessGroupGloo glooGroup(RendezvousServer server, String key, int rank) {
        return DirectC10d.glooGroup(DirectC10d.client(server.address(), TIMEOUT), key + "/direct/", rank, 2, TIMEOUT);
    }
}
