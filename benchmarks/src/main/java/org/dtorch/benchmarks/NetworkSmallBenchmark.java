package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.NetworkPromises;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.store.HostIdentity;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;

/**
 * Small hand-offs across hosts: the Network store and Network promises between two JVMs with host identities of their own
 * ({@code node-0}, this one, and {@code node-1}, a {@link NetworkBenchPeer}) against the File store and File promises
 * between the same two JVMs, in the same run, blocks of the two interleaved. The Network store's bookkeeping goes
 * through a {@code RendezvousServer} in this JVM and its bytes through Gloo on 127.0.0.1; the Network promises keep
 * their outcomes in the same server, as a multi-node runtime's shared store would.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class NetworkSmallBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long[] SIZES = {4L << 10, 64L << 10};
    private static final int HANDOFFS = 500;
    private static final int PROMISES = 200;
    /** A wait this long is a stall, not a latency. */
    private static final long STALL_NANOS = 1_000_000_000L;
    private static final ExpectedValue PROMISE_VALUE = new ExpectedValue(new long[] {NetworkBenchPeer.PROMISE_ELEMENTS}, torch.ScalarType.Long);

    private NetworkSmallBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        int handoffs = options.iterations(HANDOFFS);
        int promises = options.iterations(PROMISES);
        report.section("Small hand-offs between two hosts on loopback: Network store and promises against File", "networksmall",
            "Two JVMs with host identities of their own (`node-0` produces, `node-1` consumes; the Network store picked by "
                + "`TensorStore.createForParticipants`), the four-step handshake per hand-off. Hand-off: the producer's `srcSet` to "
                + "the consumer's `destGet` returning, read from the producer's clock value in the tensor's first 8 bytes; round: "
                + "`srcSet` to `srcWaitUntilGetFinished` returning on the producer. Baseline: the File store between the same two "
                + "JVMs (one host, `/dev/shm` and futexes). Per run " + Unit.count(handoffs) + " hand-offs of each size and store, "
                + "blocks interleaved, after one warm-up block. Promise: this JVM creates it (Network: on the rendezvous server, "
                + "`NetworkPromises.create`; File: with the value's shape) and blocks in `get()`; the peer attaches, waits "
                + NetworkBenchPeer.SET_DELAY_MICROS / 1000 + " ms, and sets a 1 KiB int64 value; latency from the peer's clock just "
                + "before `setValue` to `get()` returning; " + Unit.count(promises) + " per run and type after a warm-up block.");
        List<Row> rows = new ArrayList<>();
        Figure stalls = new Figure("Network promise `get()`s over " + STALL_NANOS / 1_000_000_000 + " s (a resolver's timeout on c10d's reverse lookup)",
            Unit.PERCENT, Goal.context("context"));
        String key = "bench/network-small-" + System.nanoTime();
        String instance = GlobalCommInstanceId.next();
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0);
             PeerJvm peer = PeerJvm.start(NetworkBenchPeer.class, "node-1", List.of(server.address().toString(), instance, key),
                 Map.of(HostIdentity.HOST_ID_PROPERTY, "node-1"));
             TensorStore network = TensorStore.createForParticipants(NetworkBenchPeer.networkInfo(server.address(), key, 0).hostId("node-0").build());
             TensorStore file = TensorStore.create(NetworkBenchPeer.fileInfo(instance, key, 0))) {
            String backend = peer.valueOf("READY");
            if (network.type() != TensorStoreType.NETWORK || !backend.equals(TensorStoreType.NETWORK.toString())) {
                throw new IllegalStateException("two host identities should give the Network store, got " + network.type() + " and " + backend);
            }
            for (long bytes : SIZES) {
                rows.addAll(handoffs(options, peer, network, file, bytes, handoffs));
            }
            rows.add(promises(options, peer, server, promises, stalls));
            peer.send("END");
            network.barrier();
            file.barrier();
        }
        report.comparisons(rows.stream().map(Row::comparison).toList());
        List<Figure> figures = new ArrayList<>();
        rows.forEach(row -> figures.addAll(List.of(row.measuredP90(), row.baselineP90())));
        figures.add(stalls);
        report.figures(figures);
    }

    /** The hand-off and round rows of one size. */
    private static List<Row> handoffs(BenchOptions options, PeerJvm peer, TensorStore network, TensorStore file, long bytes,
        int n) throws Exception {
        String label = Unit.size(bytes) + " float32";
        Row handoff = new Row(label + " hand-off (`srcSet` to `destGet`)");
        Row round = new Row(label + " round (`srcSet` to `srcWaitUntilGetFinished`)");
        try (Tensor value = torch.ones(bytes / 4)) {
            for (int run = -1; run < options.runs(); run++) { // run -1 warms up
                Samples networkRound = produce(peer, "network", network, value, n);
                Samples networkHandoff = peer.samples("Network store");
                Samples fileRound = produce(peer, "file", file, value, n);
                Samples fileHandoff = peer.samples("File store");
                if (run >= 0) {
                    handoff.add(networkHandoff, fileHandoff);
                    round.add(networkRound, fileRound);
                }
            }
        }
        return List.of(handoff, round);
    }

    /**
     * Asks the peer to consume {@code n} values of the store it calls {@code which}, produces them with this JVM's clock
     * in {@code value}'s first 8 bytes, and returns the rounds.
     */
    private static Samples produce(PeerJvm peer, String which, TensorStore store, Tensor value, int n) throws Exception {
        peer.send("CONSUME " + which + " " + n);
        Samples rounds = new Samples(which.equals("network") ? "Network store" : "File store");
        LongPointer first = new LongPointer(value.data_ptr());
        for (int i = 0; i < n; i++) {
            long start = System.nanoTime();
            first.put(0, start);
            store.srcSet("x", value, CPU, 1);
            store.srcWaitUntilGetFinished("x", CPU);
            rounds.add(System.nanoTime() - start);
        }
        return rounds;
    }

    /** The promise row; the share of Network promise waits over {@link #STALL_NANOS} goes to {@code stalls} per run. */
    private static Row promises(BenchOptions options, PeerJvm peer, RendezvousServer server, int n, Figure stalls) throws Exception {
        Row row = new Row("promise `get()`, setter waits " + NetworkBenchPeer.SET_DELAY_MICROS / 1000 + " ms");
        for (int run = -1; run < options.runs(); run++) {
            Samples network = new Samples("Network promise");
            Samples file = new Samples("File promise");
            int stalled = 0;
            for (int i = 0; i < n; i++) {
                long latency = wakeup(peer, TensorPromiseType.NETWORK,
                    NetworkPromises.create(server.address().host(), server.address().port(), NetworkBenchPeer.TIMEOUT));
                network.add(latency);
                stalled += latency > STALL_NANOS ? 1 : 0;
            }
            for (int i = 0; i < n; i++) {
                file.add(wakeup(peer, TensorPromiseType.FILE, TensorPromises.create(TensorPromiseType.FILE, NetworkBenchPeer.TIMEOUT, PROMISE_VALUE)));
            }
            if (run >= 0) {
                row.add(network, file);
                stalls.add(100.0 * stalled / n);
            }
        }
        return row;
    }

    /** One promise completed by the peer: its clock before {@code setValue} to {@code get()} returning here, in ns. */
    private static long wakeup(PeerJvm peer, TensorPromiseType type, TensorPromise promise) throws Exception {
        TensorFuture future = promise.getFuture();
        peer.send("PROMISE " + type + " " + promise.serialize());
        try (Tensor got = future.get()) {
            long returned = System.nanoTime(); // before reading the clock value: that takes JavaCPP calls of its own
            return returned - new LongPointer(got.data_ptr()).get(0);
        }
    }

    /** A comparison row, Network against File, and both sides' p90 per run (the comparison table gives p50 and p99). */
    private record Row(Comparison comparison, Figure measuredP90, Figure baselineP90) {
        Row(String label) {
            this(new Comparison(label, Goal.context("context")), new Figure(label + ", Network: p90", Unit.NANOS, Goal.context("context")),
                new Figure(label + ", File: p90", Unit.NANOS, Goal.context("context")));
        }

        void add(Samples network, Samples file) {
            comparison.add(network, file);
            measuredP90.add(network.percentile(90));
            baselineP90.add(file.percentile(90));
        }
    }
}
