package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.JvmCommand;
import org.dtorch.core.runtime.process.NodeAgent;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dtorch run --nnodes 2} end to end: launcher JVMs for the nodes of one machine that share nothing but 127.0.0.1
 * (node 1 gets a host identity of its own, {@code -Ddtorch.host.id=node1}, so no same-host path is taken between them).
 */
@Tag("multinode")
@Timeout(120)
class AcrossNodesLauncherTest {
    /** Node 0's script: a 2 x 2 mesh with one node per row, a gather and a sum across the rows. */
    private static final String SCRIPT = String.join("\n",
        "import dtorch",
        "from dtorch import Replicate, Shard",
        "assert dtorch.device_count() == 4, dtorch.device_count()",
        "mesh = dtorch.DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=['node', 'local'])",
        "x = dtorch.arange(8, device_mesh=mesh, placements=[Shard(0), Replicate()])",
        "print('gathered', x.redistribute(mesh, [Replicate(), Replicate()]).to_torch().tolist())",
        "print('sum', (x * 3).sum().to_torch().item())",
        "");
    /** How long a test waits for a launcher process to exit. */
    private static final long WAIT_SECONDS = 90;

    @Test
    void shouldRunAScriptOnTwoNodesStartedInAnyOrder(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = Files.writeString(dir.resolve("across.py"), SCRIPT);
        String port = String.valueOf(freePort());
        // Node 1 first, configured by torchrun's environment variables; node 0 by flags.
        Process node1 = start(dir, 1, Map.of("NNODES", "2", "NODE_RANK", "1", "MASTER_PORT", port, ClusterToken.ENV,
            LauncherTest.TOKEN), "run", "--devices", "cpu:2", script.toString());
        Process node0 = start(dir, 0, Map.of(ClusterToken.ENV, LauncherTest.TOKEN), "run", "--nnodes", "2", "--node-rank", "0",
            "--master-addr", "127.0.0.1", "--master-port", port, "--devices", "cpu:2", "--timeout-seconds", "60", script.toString());
        assertEquals(0, exit(node0, dir, 0), output(dir, 0) + "\nnode 1:\n" + output(dir, 1));
        assertEquals(List.of("gathered [0, 1, 2, 3, 4, 5, 6, 7]", "sum 84"), output(dir, 0).lines()
            .filter(l -> l.startsWith("gathered") || l.startsWith("sum")).toList(), output(dir, 0));
        assertEquals(NodeAgent.EXIT_DONE, exit(node1, dir, 1), output(dir, 1));
    }

    @Test
    void shouldFailBothNodesSayingSoWhenANodeHasAnotherToken(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = Files.writeString(dir.resolve("never.py"), "raise SystemExit(7)\n");
        int port = freePort();
        Process node1 = start(dir, 1, Map.of(ClusterToken.ENV, "another-token-0123456789"), "run", "--nnodes", "2", "--node-rank", "1",
            "--master-port", String.valueOf(port), "--devices", "cpu:1", "--timeout-seconds", "60", script.toString());
        LauncherTest.Outcome node0 = LauncherTest.capture(() -> Launcher.run(LauncherTest.args("run", "--nnodes", "2", "--master-port",
            String.valueOf(port), "--devices", "cpu:1", "--timeout-seconds", "60", script.toString()), Map.of(ClusterToken.ENV,
            LauncherTest.TOKEN)));
        // The refusal is logged where it happens (a warning naming the peer's address), then the launcher's one line.
        List<String> lines = node0.errLines();
        assertEquals(2, node0.status(), node0.err());
        assertTrue(lines.getLast().startsWith("dtorch: node 0 refused a control connection") && lines.getLast().contains("different tokens")
            && lines.getLast().contains(ClusterToken.ENV), node0.err());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("WARNING: control connection refused") && l.contains("127.0.0.1")), node0.err());
        assertEquals(NodeAgent.EXIT_START_FAILED, exit(node1, dir, 1), output(dir, 1));
        assertTrue(output(dir, 1).lines().anyMatch(l -> l.startsWith("dtorch: node 1 (device 1): cannot join the run at 127.0.0.1:" + port)
            && l.contains("token")), "node 1 says why it could not join:\n" + output(dir, 1));
    }

    @Test
    void shouldNameTheNodeThatNeverArrivedAtTheDeadline(@TempDir Path dir) throws IOException {
        Path script = Files.writeString(dir.resolve("never.py"), "raise SystemExit(7)\n");
        long start = System.nanoTime();
        LauncherTest.assertRejected(Map.of(ClusterToken.ENV, LauncherTest.TOKEN), LauncherTest.args("run", "--nnodes", "2",
            "--master-port", String.valueOf(freePort()), "--devices", "cpu:1", "--timeout-seconds", "5", script.toString()),
            "node rank [1] never arrived", "5 s");
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        assertTrue(seconds >= 5 && seconds < 30, "failed after " + seconds + " s, the deadline was 5 s");
    }

    /** The launcher processes a test started; whatever is left of them is killed after it. */
    private final List<Process> started = new ArrayList<>();

    @AfterEach
    void killWhatIsLeft() {
        started.forEach(Process::destroyForcibly);
    }

    /** Starts node {@code rank}'s launcher, its output (and its workers') in {@code dir/node-R.log}. */
    private Process start(Path dir, int rank, Map<String, String> env, String... args) throws IOException {
        List<String> jvm = new ArrayList<>(List.of("-Xmx" + (rank == 0 ? "1g" : "256m")));
        ProcessBuilder builder = JvmCommand.of(Launcher.class.getName(), List.of(args), Map.of("dtorch.host.id", "node" + rank), jvm)
            .processBuilder();
        builder.environment().keySet().removeAll(NodeOptions.ENVIRONMENT.values());
        builder.environment().remove(ClusterToken.ENV);
        builder.environment().putAll(env);
        builder.redirectErrorStream(true).redirectOutput(dir.resolve("node-" + rank + ".log").toFile());
        Process node = builder.start();
        started.add(node);
        return node;
    }

    private static int exit(Process node, Path dir, int rank) throws InterruptedException, IOException {
        if (!node.waitFor(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new AssertionError("node " + rank + " did not exit within " + WAIT_SECONDS + " s; its output:\n" + output(dir, rank));
        }
        return node.exitValue();
    }

    private static String output(Path dir, int rank) throws IOException {
        return Files.readString(dir.resolve("node-" + rank + ".log"));
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
