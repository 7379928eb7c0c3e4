package org.dtorch.benchmarks;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.NodeAgent;
import org.dtorch.core.runtime.process.NodeSpec;

/**
 * The runtime across nodes, on loopback: every other node is a node agent JVM with a host identity of its own
 * ({@code -Ddtorch.host.id}), so that nothing between nodes takes a same-host path. Measured: the per-operator cost with
 * a 4-device mesh spanning two nodes of two devices, against process mode's four worker processes on one host (the same
 * program), for an operator that stays on each device and for one that communicates across the mesh; and the start of
 * a run of 2 and 4 nodes (node 0's {@code DTorch.init}, the other nodes' agents already up and waiting).
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class NodesBenchmark {
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    private static final int LOCAL_OPS = 4_000;
    private static final int COLLECTIVE_OPS = 1_000;

    private NodesBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("Runtime across nodes on loopback", "nodes",
            "Mean time per operator over rounds, results dropped, then `sync()`: `add` of two (4,) tensors sharded on a 4-device "
                + "mesh (" + Unit.count(options.iterations(LOCAL_OPS)) + " per round), and S(0) -> R of a (4,) tensor, an all-gather "
                + "over the mesh (" + Unit.count(options.iterations(COLLECTIVE_OPS)) + " per round). Measured: two nodes of two worker "
                + "processes each (node 1 an agent JVM with a host identity of its own, all on 127.0.0.1); baseline: process mode, four "
                + "worker processes of one host. Then the start of a run: node 0's `DTorch.init` with the other nodes' agents already "
                + "waiting (it starts node 0's workers, the agents start theirs, every worker connects and proves the token).");
        Comparison local = new Comparison("add (4,) S(0), 2 nodes x 2 vs 4 worker processes", Goal.context("cost of the nodes"));
        Comparison collective = new Comparison("S(0) -> R of (4,), 2 nodes x 2 vs 4 worker processes", Goal.context("cost of the nodes"));
        Figure twoNodes = new Figure("start of a run of 2 nodes x 1 device", Unit.NANOS, Goal.context("measured"));
        Figure fourNodes = new Figure("start of a run of 4 nodes x 1 device", Unit.NANOS, Goal.context("measured"));
        int rounds = options.rounds() * 2;
        for (int run = 0; run < options.runs(); run++) {
            Samples[] nodes = perOperator(true, rounds, options);
            Samples[] processes = perOperator(false, rounds, options);
            local.add(nodes[0], processes[0]);
            collective.add(nodes[1], processes[1]);
            twoNodes.add(startNanos(2));
            fourNodes.add(startNanos(4));
        }
        report.comparisons(List.of(local, collective));
        report.figures(List.of(twoNodes, fourNodes));
    }

    /** The local and the collective operator's cost per operator, in one runtime across two nodes or in process mode. */
    private static Samples[] perOperator(boolean acrossNodes, int rounds, BenchOptions options) throws Exception {
        String mode = acrossNodes ? "2 nodes x 2" : "process mode";
        Samples local = new Samples(mode);
        Samples collective = new Samples(mode);
        try (Nodes run = acrossNodes ? Nodes.start(2, 2) : null;
             DTorch dt = acrossNodes ? run.init() : DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).timeout(TIMEOUT)
                 .build())) {
            DeviceMesh mesh = dt.defaultMesh();
            try (DTensor a = dt.ones(new long[] {4}, mesh, Placement.shard(0)); DTensor b = dt.ones(new long[] {4}, mesh, Placement.shard(0))) {
                dt.sync();
                int perRound = options.iterations(LOCAL_OPS);
                int gathers = options.iterations(COLLECTIVE_OPS);
                for (int round = -2; round < rounds; round++) {
                    long start = System.nanoTime();
                    for (int i = 0; i < perRound; i++) {
                        a.add(b).close();
                    }
                    dt.sync();
                    long mid = System.nanoTime();
                    for (int i = 0; i < gathers; i++) {
                        a.redistribute(Placement.replicate()).close();
                    }
                    dt.sync();
                    if (round >= 0) {
                        local.add((mid - start) / perRound);
                        collective.add((System.nanoTime() - mid) / gathers);
                    }
                }
            }
        }
        return new Samples[] {local, collective};
    }

    /** Node 0's {@code DTorch.init} of a run of {@code count} nodes of one device, the agents started first and waiting. */
    private static long startNanos(int count) throws Exception {
        try (Nodes run = Nodes.start(count, 1)) {
            run.awaitAgentsUp();
            long start = System.nanoTime();
            try (DTorch dt = run.init()) {
                long took = System.nanoTime() - start;
                dt.sync();
                return took;
            }
        }
    }

    /** The agents of nodes 1 and up of a run on 127.0.0.1, and node 0's options. */
    private record Nodes(int count, int perNode, int port, String token, List<Process> agents) implements AutoCloseable {

        static Nodes start(int count, int perNode) throws IOException {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            String token = "bench-" + UUID.randomUUID();
            List<Process> agents = new ArrayList<>();
            for (int rank = 1; rank < count; rank++) {
                ProcessBuilder builder = NodeAgent.command(count, rank, new RendezvousAddress("127.0.0.1", port), "cpu:" + perNode, TIMEOUT,
                    ClusterToken.of(token, "the benchmark"), Map.of("dtorch.host.id", "node" + rank));
                agents.add(builder.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start());
            }
            return new Nodes(count, perNode, port, token, agents);
        }

        /** Gives the agents' JVMs time to start, so that the start measured is the run's, not theirs. */
        void awaitAgentsUp() throws InterruptedException {
            Thread.sleep(3_000);
        }

        DTorch init() {
            NodeSpec spec = new NodeSpec(count, 0, new RendezvousAddress("127.0.0.1", port), ClusterToken.of(token, "the benchmark"), perNode);
            return DTorch.init(DTorchOptions.builder().nodes(spec).timeout(TIMEOUT).build());
        }

        @Override
        public void close() throws InterruptedException {
            for (Process agent : agents) {
                if (!agent.waitFor(20, TimeUnit.SECONDS)) {
                    agent.destroyForcibly();
                }
            }
        }
    }
}
