package org.dtorch.ops;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.NodeAgent;
import org.dtorch.core.runtime.process.NodeSpec;
import org.dtorch.core.shm.SharedRegion;

/**
 * A run across nodes on this machine: node 0 is this JVM (the controller), every other node a node agent JVM with a host
 * identity of its own ({@code -Ddtorch.host.id=nodeR}), so that nothing between nodes takes a same-host path. All talk
 * over 127.0.0.1.
 */
final class TwoNodes {
    /** The run's token, as every node gets it. */
    static final String TOKEN = "test-token-" + UUID.randomUUID();

    private TwoNodes() {
    }

    /** Where node {@code rank}'s agent and its workers write their output: {@code target/node-R.log}. */
    static Path log(int rank) {
        return Path.of("target", "node-" + rank + ".log").toAbsolutePath();
    }

    /** A port nothing listens on now. */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new AssertionError("no free port", e);
        }
    }

    /** Starts node {@code rank}'s agent of a run of {@code nodes} nodes of {@code perNode} CPU devices at 127.0.0.1:{@code port}. */
    static Process startAgent(int nodes, int rank, int port, int perNode, Duration timeout, String token) {
        ProcessBuilder builder = NodeAgent.command(nodes, rank, new RendezvousAddress("127.0.0.1", port), "cpu:" + perNode, timeout,
            ClusterToken.of(token, "the test"), Map.of("dtorch.host.id", "node" + rank));
        builder.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log(rank).toFile()));
        try {
            return builder.start();
        } catch (IOException e) {
            throw new AssertionError("cannot start node " + rank, e);
        }
    }

    /** Node 0's options for a run of {@code nodes} nodes of {@code perNode} CPU devices at 127.0.0.1:{@code port}. */
    static DTorchOptions.Builder options(int nodes, int port, int perNode, Duration timeout) {
        NodeSpec spec = new NodeSpec(nodes, 0, new RendezvousAddress("127.0.0.1", port), ClusterToken.of(TOKEN, "the test"), perNode);
        return DTorchOptions.builder().nodes(spec).timeout(timeout);
    }

    /** A started run: its runtime, the agents of nodes 1 and up, and its master port. */
    record Run(DTorch dt, List<Process> agents, int port) implements AutoCloseable {

        /** Closes the runtime and checks that every agent exits 0 within 20 s. */
        @Override
        public void close() {
            dt.close();
            for (Process agent : agents) {
                try {
                    if (!agent.waitFor(20, TimeUnit.SECONDS)) {
                        agent.destroyForcibly();
                        throw new AssertionError("node agent " + agent.pid() + " did not exit after the run ended");
                    }
                    if (agent.exitValue() != NodeAgent.EXIT_DONE) {
                        throw new AssertionError("node agent " + agent.pid() + " exited with " + agent.exitValue());
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError(e);
                }
            }
        }
    }

    /** Starts a run of {@code nodes} nodes of {@code perNode} CPU devices: the agents first, then node 0. */
    static Run start(int nodes, int perNode, Duration timeout) {
        int port = freePort();
        List<Process> agents = new ArrayList<>();
        for (int r = 1; r < nodes; r++) {
            agents.add(startAgent(nodes, r, port, perNode, timeout, TOKEN));
        }
        try {
            return new Run(DTorch.init(options(nodes, port, perNode, timeout).shutdownTimeout(Duration.ofSeconds(5)).build()), agents, port);
        } catch (RuntimeException e) {
            agents.forEach(Process::destroyForcibly);
            throw e;
        }
    }

    /** The shared memory of runtime {@code instance} still in /dev/shm. */
    static List<String> sharedMemoryOf(String instance) {
        try (Stream<Path> files = Files.list(SharedRegion.directory())) {
            return files.map(p -> p.getFileName().toString()).filter(n -> n.contains(instance)).toList();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }
}
