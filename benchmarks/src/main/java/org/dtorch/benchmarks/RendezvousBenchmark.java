package org.dtorch.benchmarks;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.store.HostIdentity;

/**
 * The rendezvous time: what a multi-node run's start costs in c10d terms, for 2 and 4 "nodes" (JVMs of their
 * own, {@link RendezvousBenchPeer}, each with a host identity of its own, on 127.0.0.1). Once every JVM has loaded
 * libtorch (JVM start-up is not measured), the harness reads its clock and tells them all to go; node 0 starts the
 * {@code RendezvousServer}, every node connects a {@code TCPStore} client and joins one Gloo group over a
 * {@code PrefixStore}. Measured: from the go to the last node's client connected, and to the last node in the group
 * (the nodes print {@link System#nanoTime()}, one clock for the processes of a host), either leaving it to c10d to
 * retry while the server is not up or probing its port first. Each run starts fresh JVMs: its first rendezvous is the
 * one a run pays (the first c10d calls of the process), the next ones meet again on a new server and port. No
 * baseline: these are the costs themselves.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class RendezvousBenchmark {
    private static final int[] NODES = {2, 4};

    private RendezvousBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("Rendezvous: 2 and 4 nodes on loopback", "rendezvous",
            "From a go given once every node's JVM has loaded libtorch to the last node connected: node 0 starts a "
                + "`RendezvousServer`, each node connects a c10d `TCPStore` client to it and joins one Gloo group of all the nodes "
                + "over a `PrefixStore`. Nodes are JVMs with host identities of their own (`-Ddtorch.host.id=node-<r>`) on 127.0.0.1. "
                + "*c10d retries*: the other nodes create their clients at once and c10d retries while the server is not up; "
                + "*probe*: they first wait for the server's port to accept a plain Java socket connection, tried every 5 ms. Per "
                + "run and way fresh JVMs: the first rendezvous (the processes' first c10d calls: what a run's start pays), then "
                + options.rounds() + " more on a new server each (warm processes). Each figure is the median over the runs; the warm "
                + "rows take each run's median.");
        List<Figure> rows = new ArrayList<>();
        for (int nodes : NODES) {
            for (String way : List.of("c10d", "probe")) {
                String name = nodes + " nodes, " + (way.equals("c10d") ? "c10d retries" : "probe") + ", ";
                Figure[] first = {new Figure(name + "first: node 0's server up", Unit.NANOS, Goal.context("context")),
                    new Figure(name + "first: every client connected", Unit.NANOS, Goal.context("context")),
                    new Figure(name + "first: every node in the Gloo group", Unit.NANOS, Goal.context("context"))};
                Figure[] warm = {new Figure(name + "warm: every client connected", Unit.NANOS, Goal.context("context")),
                    new Figure(name + "warm: every node in the Gloo group", Unit.NANOS, Goal.context("context"))};
                for (int run = 0; run < options.runs(); run++) {
                    measure(options, nodes, way, run, first, warm);
                }
                rows.addAll(List.of(first));
                rows.addAll(List.of(warm));
            }
        }
        report.figures(rows);
    }

    /** One run: fresh node JVMs, their first rendezvous into {@code first}, the median of the next ones into {@code warm}. */
    private static void measure(BenchOptions options, int nodes, String way, int run, Figure[] first, Figure[] warm) throws Exception {
        List<PeerJvm> peers = startNodes(nodes);
        try {
            String key = "bench/rendezvous-" + nodes + "-" + way + "-" + run + "-";
            long[] times = rendezvous(peers, key + "first", way);
            for (int i = 0; i < first.length; i++) {
                first[i].add(times[i]);
            }
            Samples clients = new Samples("clients");
            Samples group = new Samples("group");
            for (int round = 0; round < options.rounds(); round++) {
                times = rendezvous(peers, key + round, way);
                clients.add(times[1]);
                group.add(times[2]);
            }
            warm[0].add(clients.p50());
            warm[1].add(group.p50());
        } finally {
            for (PeerJvm peer : peers) {
                peer.close();
            }
        }
    }

    /** {@code nodes} node JVMs, each loaded and waiting for its go. */
    private static List<PeerJvm> startNodes(int nodes) throws IOException {
        List<PeerJvm> peers = new ArrayList<>();
        for (int rank = 0; rank < nodes; rank++) {
            peers.add(PeerJvm.start(RendezvousBenchPeer.class, "node-" + rank, List.of(String.valueOf(rank), String.valueOf(nodes), "127.0.0.1"),
                Map.of(HostIdentity.HOST_ID_PROPERTY, "node-" + rank)));
        }
        for (PeerJvm peer : peers) {
            peer.awaitLine("READY");
        }
        return peers;
    }

    /**
     * One rendezvous of {@code peers} under {@code key} on a new server, the other nodes waiting for it {@code way}: the
     * times from the go to node 0's server up, to the last client connected and to the last node in the group, in ns;
     * then every node closes its group, node 0 last (it stops the server).
     */
    private static long[] rendezvous(List<PeerJvm> peers, String key, String way) throws IOException {
        int port = freePort();
        long start = System.nanoTime();
        for (PeerJvm peer : peers) {
            peer.send("GO " + port + " " + key + " " + way);
        }
        long[] latest = new long[3];
        for (PeerJvm peer : peers) {
            String[] times = peer.valueOf("CONNECTED").split(" ");
            for (int i = 0; i < latest.length; i++) {
                latest[i] = Math.max(latest[i], Long.parseLong(times[i]) - start);
            }
        }
        for (PeerJvm peer : peers.reversed()) {
            peer.send("END");
            peer.awaitLine("CLOSED");
        }
        return latest;
    }

    /** A port of 127.0.0.1 that was free a moment ago (the server binds it with {@code SO_REUSEADDR}). */
    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }
}
