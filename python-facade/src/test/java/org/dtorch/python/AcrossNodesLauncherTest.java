package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.JvmCommand;
import org.dtorch.core.runtime.process.NodeAgent;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dtorch run --nnodes 2} end to end: launcher JVMs for the nodes of one machine that share nothing but the network
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
    /** What the script prints. */
    private static final List<String> PRINTED = List.of("gathered [0, 1, 2, 3, 4, 5, 6, 7]", "sum 84");
    /** How long a test waits for a launcher process to exit. */
    private static final long WAIT_SECONDS = 90;

    /**
     * Two nodes of two devices; node 1 starts first, configured by torchrun's environment variables, node 0 by flags.
     * Where user namespaces allow, the nodes are in two network namespaces joined by a veth pair, 10.77.0.1 (node 0) and
     * 10.77.0.2 (node 1), so that nothing between them can go through loopback; elsewhere they meet on 127.0.0.1, and the
     * test says why. Slow: four JVMs with GraalPy on two cores; every build runs the nodes' runtime across hosts through
     * AcrossNodesSmokeTest, and the launcher's node arguments through the refusals below.
     */
    @Test
    @Tag("slow")
    void shouldRunAScriptOnTwoNodesStartedInAnyOrder(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = Files.writeString(dir.resolve("across.py"), SCRIPT);
        String port = String.valueOf(freePort());
        String why = inNamespaces(dir, port, script);
        if (why != null) {
            System.out.println("AcrossNodesLauncherTest: two network namespaces joined by a veth pair cannot be made here (" + why
                + "); the nodes meet on 127.0.0.1");
            Process node1 = start(dir, 1, node1Environment("127.0.0.1", port), node1Args(script));
            Process node0 = start(dir, 0, Map.of(ClusterToken.ENV, LauncherTest.TOKEN), node0Args("127.0.0.1", port, script));
            int status0 = exit(node0, dir, 0);
            Files.writeString(dir.resolve("status"), status0 + " " + exit(node1, dir, 1));
        }
        assertEquals("0 " + NodeAgent.EXIT_DONE, read(dir, "status").strip(), "exit statuses of node 0 and node 1\nnode 0:\n"
            + output(dir, 0) + "\nnode 1:\n" + output(dir, 1));
        assertEquals(PRINTED, printed(dir), output(dir, 0));
    }

    /** Node 1's variables: torchrun's, and the token. */
    private static Map<String, String> node1Environment(String master, String port) {
        return Map.of("NNODES", "2", "NODE_RANK", "1", "MASTER_ADDR", master, "MASTER_PORT", port, ClusterToken.ENV, LauncherTest.TOKEN);
    }

    private static String[] node1Args(Path script) {
        return LauncherTest.args("run", "--devices", "cpu:2", script.toString());
    }

    private static String[] node0Args(String master, String port, Path script) {
        return LauncherTest.args("run", "--nnodes", "2", "--node-rank", "0", "--master-addr", master, "--master-port", port, "--devices",
            "cpu:2", "--timeout-seconds", "60", script.toString());
    }

    /**
     * Runs the two nodes in two network namespaces: a shell under {@code unshare -rn} (a user namespace, so no privileges
     * are needed) makes a second namespace, moves one end of a veth pair into it and runs node 1 there through
     * {@code nsenter}, then node 0 in its own, and writes both exit statuses to {@code dir/status}. Returns why the
     * namespaces could not be made, or null once the nodes ran.
     */
    private String inNamespaces(Path dir, String port, Path script) throws IOException, InterruptedException {
        StringBuilder node1 = new StringBuilder("env");
        node1Environment("10.77.0.1", port).forEach((k, v) -> node1.append(' ').append(quote(k + "=" + v)));
        Path shell = Files.writeString(dir.resolve("namespaces.sh"), String.join("\n",
            "set -u",
            "cd " + quote(dir.toString()),
            "unshare -n sleep 300 & NS1=$!",
            "trap 'kill $NS1 2>/dev/null' EXIT",
            "for i in $(seq 100); do [ \"$(readlink /proc/$NS1/ns/net)\" != \"$(readlink /proc/$$/ns/net)\" ] && break; sleep 0.05; done",
            "{ ip link set lo up && ip link add dt-veth0 type veth peer name dt-veth1 && ip link set dt-veth1 netns $NS1"
                + " && ip addr add 10.77.0.1/24 dev dt-veth0 && ip link set dt-veth0 up && nsenter -t $NS1 -n sh -c"
                + " 'ip link set lo up && ip addr add 10.77.0.2/24 dev dt-veth1 && ip link set dt-veth1 up'; } > setup.log 2>&1"
                + " || exit 1",
            "nsenter -t $NS1 -n " + node1 + " " + shellWords(command(1, List.of(node1Args(script)))) + " > node-1.log 2>&1 & N1=$!",
            shellWords(command(0, List.of(node0Args("10.77.0.1", port, script)))) + " > node-0.log 2>&1; S0=$?",
            "wait $N1; echo \"$S0 $?\" > status",
            ""));
        ProcessBuilder builder = new ProcessBuilder("unshare", "-rn", "bash", shell.toString()).redirectErrorStream(true)
            .redirectOutput(dir.resolve("unshare.log").toFile());
        environment(builder, Map.of(ClusterToken.ENV, LauncherTest.TOKEN));
        Process namespaces;
        try {
            namespaces = builder.start();
        } catch (IOException e) {
            return "no unshare: " + e.getMessage();
        }
        started.add(namespaces);
        int status = exit(namespaces, dir, "the namespaces' shell", "unshare.log");
        if (!Files.exists(dir.resolve("status"))) { // the shell writes it once it ran both nodes
            return "unshare -rn, ip and nsenter; exit status " + status + ": " + (read(dir, "unshare.log") + read(dir, "setup.log")).strip();
        }
        assertEquals(0, status, read(dir, "unshare.log"));
        return null;
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
        // The launcher's one line comes last; the handshake's warning naming the peer may precede it in the log.
        String line = node0.errLines().getLast();
        assertEquals(2, node0.status(), node0.err());
        assertTrue(line.startsWith("dtorch: ") && line.contains("refused our token") && line.contains("127.0.0.1")
            && line.contains("different tokens") && line.contains(ClusterToken.ENV), node0.err());
        assertNoWorkerLeft();
        assertEquals(NodeAgent.EXIT_START_FAILED, exit(node1, dir, 1), output(dir, 1));
        assertTrue(output(dir, 1).lines().anyMatch(l -> l.startsWith("dtorch: node 1 (device 1): cannot join the run at 127.0.0.1:" + port)
            && l.contains("token")), "node 1 says why it could not join:\n" + output(dir, 1));
    }

    @Test
    void shouldNameTheNodeThatNeverArrivedAtTheDeadline(@TempDir Path dir) throws IOException, InterruptedException {
        Path script = Files.writeString(dir.resolve("never.py"), "raise SystemExit(7)\n");
        long start = System.nanoTime();
        LauncherTest.assertRejected(Map.of(ClusterToken.ENV, LauncherTest.TOKEN), LauncherTest.args("run", "--nnodes", "2",
            "--master-port", String.valueOf(freePort()), "--devices", "cpu:1", "--timeout-seconds", "5", script.toString()),
            "node rank [1] never arrived", "5 s");
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        assertTrue(seconds >= 5 && seconds < 30, "failed after " + seconds + " s, the deadline was 5 s");
        assertNoWorkerLeft();
    }

    /** The processes a test started; whatever is left of them and of their children is killed after it. */
    private final List<Process> started = new ArrayList<>();

    @AfterEach
    void killWhatIsLeft() {
        for (Process p : started) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }

    @Test
    void shouldStopANodeThatFindsNoNodeZeroByItsDeadline(@TempDir Path dir) throws IOException {
        String port = String.valueOf(freePort());
        long start = System.nanoTime();
        LauncherTest.Outcome node1 = LauncherTest.capture(() -> Launcher.run(LauncherTest.args("run", "--nnodes", "2", "--node-rank", "1",
            "--master-port", port, "--devices", "cpu:1", "--timeout-seconds", "3", dir.resolve("not-read.py").toString()),
            Map.of(ClusterToken.ENV, LauncherTest.TOKEN)));
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        assertEquals(NodeAgent.EXIT_START_FAILED, node1.status(), node1.err());
        assertTrue(node1.errLines().getLast().startsWith("dtorch: node 1 (device 1): cannot join the run at 127.0.0.1:" + port),
            node1.err());
        assertTrue(seconds >= 3 && seconds < 20, "gave up after " + seconds + " s, the deadline was 3 s");
    }

    /**
     * Node 0 ran in this JVM and failed to start: within 10 s, no process this JVM started is left but those the test
     * started itself (node 0's worker processes were stopped).
     */
    private void assertNoWorkerLeft() {
        Set<Long> ours = started.stream().map(Process::pid).collect(Collectors.toSet());
        Supplier<List<ProcessHandle>> left = () -> ProcessHandle.current().children().filter(p -> p.isAlive() && !ours.contains(p.pid()))
            .toList();
        Await.until(() -> left.get().isEmpty(), Duration.ofSeconds(10), () -> "no process of node 0 is left after it failed: "
            + left.get().stream().map(p -> p.pid() + " " + p.info().commandLine().orElse("?")).toList() + " still run");
    }

    /** Starts node {@code rank}'s launcher, its output (and its workers') in {@code dir/node-R.log}. */
    private Process start(Path dir, int rank, Map<String, String> env, String... args) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(command(rank, List.of(args)));
        environment(builder, env);
        builder.redirectErrorStream(true).redirectOutput(dir.resolve("node-" + rank + ".log").toFile());
        Process node = builder.start();
        started.add(node);
        return node;
    }

    /** The launcher's command line for node {@code rank}, with a host identity of its own. */
    private static List<String> command(int rank, List<String> args) {
        return JvmCommand.of(Launcher.class.getName(), args, Map.of("dtorch.host.id", "node" + rank),
            List.of("-Xmx" + (rank == 0 ? "1g" : "256m"))).command();
    }

    /** Gives {@code builder} this JVM's environment without any node variable or token, then {@code env}. */
    private static void environment(ProcessBuilder builder, Map<String, String> env) {
        builder.environment().keySet().removeAll(NodeOptions.ENVIRONMENT.values());
        builder.environment().remove(ClusterToken.ENV);
        builder.environment().putAll(env);
    }

    /** {@code words} as one line of bash, each word single-quoted. */
    private static String shellWords(List<String> words) {
        return String.join(" ", words.stream().map(AcrossNodesLauncherTest::quote).toList());
    }

    private static String quote(String word) {
        return "'" + word.replace("'", "'\\''") + "'";
    }

    private static int exit(Process node, Path dir, int rank) throws InterruptedException, IOException {
        return exit(node, dir, "node " + rank, "node-" + rank + ".log");
    }

    private static int exit(Process process, Path dir, String what, String log) throws InterruptedException, IOException {
        if (!process.waitFor(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new AssertionError(what + " did not exit within " + WAIT_SECONDS + " s; its output:\n" + read(dir, log));
        }
        return process.exitValue();
    }

    private static String output(Path dir, int rank) throws IOException {
        return read(dir, "node-" + rank + ".log");
    }

    /** The lines node 0's script printed. */
    private static List<String> printed(Path dir) throws IOException {
        return output(dir, 0).lines().filter(l -> l.startsWith("gathered") || l.startsWith("sum")).toList();
    }

    /** The file {@code name} of {@code dir}, or "" when there is none. */
    private static String read(Path dir, String name) throws IOException {
        Path file = dir.resolve(name);
        return Files.exists(file) ? Files.readString(file) : "";
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
