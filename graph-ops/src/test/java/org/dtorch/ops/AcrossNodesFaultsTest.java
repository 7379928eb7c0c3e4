package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.JvmCommand;
import org.dtorch.core.runtime.process.NodeAgent;
import org.dtorch.core.runtime.process.WorkerDiedException;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A run across nodes when a node dies, never comes, holds another token, or a stranger writes to the control port. */
@Tag("multinode")
@Timeout(180)
class AcrossNodesFaultsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    /** Three nodes of one device; node 1 is killed, node 2 is told to end at once. */
    @Test
    void shouldFailEveryPendingFutureNamingTheKilledNodeEndTheOthersAndCleanUp(@TempDir Path dir) throws Exception {
        TwoNodes.Run run = TwoNodes.start(3, 1, TIMEOUT);
        DTorch dt = run.dt();
        String instance = dt.runtime().instanceId();
        long remoteWorker = dt.runtime().workerPids().get(1L);
        List<TensorFuture> futures = new ArrayList<>();
        DTensor x = dt.ones(new long[] {8, 4}, dt.defaultMesh(), Placement.shard(0));
        try (Tensor warm = x.sum().toTorch()) {
            assertEquals(32.0, warm.item_double());
        }
        DTensor t = x;
        for (int i = 0; i < 10; i++) {
            t = dt.apply(new TestOps.Sleep(100), t).redistribute(Placement.replicate()).redistribute(Placement.shard(0));
            futures.add(t.sum().toTorchAsync());
        }
        Path gate = dir.resolve("open");
        futures.add(dt.apply(new TestOps.Gate(gate.toString(), TIMEOUT.toMillis()), t).sum().toTorchAsync());
        futures.getFirst().waitFor(TIMEOUT).ifPresent(Tensor::close);
        long killedAt = System.nanoTime();
        run.agents().getFirst().destroyForcibly(); // SIGKILL of node 1's agent, mid-graph
        Files.createFile(gate);
        int failed = 0;
        for (TensorFuture f : futures) {
            try (Tensor value = f.get()) {
                assertEquals(32.0, value.item_double(), "a future that completed before the kill has the right value");
            } catch (FutureFailedException e) {
                failed++;
                WorkerDiedException death = assertInstanceOf(WorkerDiedException.class, e.getCause(), e.getMessage());
                assertTrue(death.getMessage().contains("node 1 (device 1)") && death.getMessage().contains("was lost"), death.getMessage());
            }
        }
        long failedWithinMillis = (System.nanoTime() - killedAt) / 1_000_000;
        assertTrue(failed > 0, "the kill came while work was pending");
        // Generous, yet far from the 60 s deadline: the death must be noticed, not waited out.
        assertTrue(failedWithinMillis < TIMEOUT.toMillis() / 2, "every future completed " + failedWithinMillis + " ms after the kill");
        Process other = run.agents().get(1);
        assertTrue(other.waitFor(15, TimeUnit.SECONDS), "node 2 ends with the run it was part of, before node 0 closes");
        assertEquals(NodeAgent.EXIT_DONE, other.exitValue());
        IllegalStateException refused = assertThrows(IllegalStateException.class, () -> x.mul(2.0));
        assertTrue(refused.getMessage().contains("node 1"), refused.getMessage());
        long closing = System.nanoTime();
        dt.close();
        assertTrue((System.nanoTime() - closing) / 1_000_000 < 15_000, "close after a node's death must not hang");
        Await.until(() -> !ProcessHandle.of(remoteWorker).map(ProcessHandle::isAlive).orElse(false), Duration.ofSeconds(15),
            "node 1's worker exits when its agent dies");
        for (long pid : dt.runtime().workerPids().values()) {
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "worker " + pid + " still runs");
        }
        assertEquals(List.of(), TwoNodes.sharedMemoryOf(instance), "shared memory left behind");
    }

    /**
     * Tagged {@code slow}: every build ends a run whose node dies (above); this is the other direction, a node agent
     * that loses its controller.
     */
    @Test
    @Tag("slow")
    void shouldEndTheOtherNodesWhenTheControllerDies() throws Exception {
        int port = TwoNodes.freePort();
        long logBefore = Files.exists(TwoNodes.log(1)) ? Files.size(TwoNodes.log(1)) : 0; // the log is appended to by every run
        Process agent = TwoNodes.startAgent(2, 1, port, 1, TIMEOUT, TwoNodes.TOKEN);
        ProcessBuilder builder = JvmCommand.of(NodeZeroChild.class.getName(), List.of(String.valueOf(port), "1"), Map.of(),
            List.of("-Xmx512m")).processBuilder();
        builder.environment().put(ClusterToken.ENV, TwoNodes.TOKEN);
        builder.redirectErrorStream(true);
        Process controller = builder.start();
        String instance = null;
        try (BufferedReader out = new BufferedReader(new InputStreamReader(controller.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = out.readLine()) != null; ) {
                System.out.println("[node 0] " + line);
                if (line.startsWith("ready ")) {
                    instance = line.split(" ")[1];
                    assertEquals("8.0", line.split(" ")[2], "a collective across the nodes ran");
                    break;
                }
            }
            assertTrue(instance != null, "node 0 exited before it got ready");
            controller.destroyForcibly();
            assertTrue(agent.waitFor(TIMEOUT.toSeconds(), TimeUnit.SECONDS), "node 1 did not notice the controller's death");
            assertEquals(NodeAgent.EXIT_CONTROLLER_GONE, agent.exitValue());
            // Noticed through the connection, at once, not by the heartbeats' silence: a killed process's socket ends
            // with a FIN (closed) or, when data it had not read was left in its buffer, a reset (broke).
            String log = Files.readString(TwoNodes.log(1));
            String run = log.substring((int) Math.min(logBefore, log.length()));
            assertTrue(run.contains("the controller's control connection closed")
                || run.contains("the controller's control connection broke: Connection reset"), log);
            assertFalse(run.contains("the controller fell silent"), log);
        } finally {
            controller.destroyForcibly();
            agent.destroyForcibly();
            if (instance != null) {
                SharedRegion.unlinkAll(SharedRegion.PREFIX + instance + "-"); // what the killed controller could not remove
            }
        }
    }

    @Test
    void shouldFailAtTheRendezvousDeadlineNamingTheMissingNode() {
        long start = System.nanoTime();
        CommException e = assertThrows(CommException.class, () -> DTorch.init(TwoNodes.options(2, TwoNodes.freePort(), 1,
            Duration.ofSeconds(3)).build()));
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(e.getMessage().contains("node rank [1] never arrived (0 of 1 other nodes connected)"), e.getMessage());
        assertTrue(millis < 15_000, "failed after " + millis + " ms");
    }

    @Test
    void shouldRefuseANodeOfAnotherConfigurationSayingWhyOnBothSides() throws Exception {
        int port = TwoNodes.freePort();
        Process agent = TwoNodes.startAgent(2, 1, port, 2, TIMEOUT, TwoNodes.TOKEN);
        try {
            CommException e = assertThrows(CommException.class, () -> DTorch.init(TwoNodes.options(2, port, 1, TIMEOUT).build()));
            assertTrue(e.getMessage().contains("was started with 2 nodes of cpu:2, node 0 with 2 nodes of cpu:1"), e.getMessage());
            assertTrue(agent.waitFor(20, TimeUnit.SECONDS), "node 1 gives up");
            assertEquals(NodeAgent.EXIT_START_FAILED, agent.exitValue());
            String log = Files.readString(TwoNodes.log(1));
            assertTrue(log.contains("refused node 1 (devices 2, 3): the node agent at"), "node 1 says why it was refused:\n" + log);
        } finally {
            agent.destroyForcibly();
        }
    }

    @Test
    void shouldRefuseANodeWithAnotherTokenAtOnce() throws Exception {
        int port = TwoNodes.freePort();
        Process agent = TwoNodes.startAgent(2, 1, port, 1, TIMEOUT, "another-token-0123456789abcdef");
        try {
            long start = System.nanoTime();
            CommException e = assertThrows(CommException.class, () -> DTorch.init(TwoNodes.options(2, port, 1, TIMEOUT).build()));
            long millis = (System.nanoTime() - start) / 1_000_000;
            assertTrue(e.getMessage().contains("different tokens"), e.getMessage());
            assertTrue(millis < TIMEOUT.toMillis() / 2, "a wrong token fails the start at once, not at the deadline: " + millis + " ms");
            assertTrue(agent.waitFor(20, TimeUnit.SECONDS), "node 1 gives up");
            assertEquals(NodeAgent.EXIT_START_FAILED, agent.exitValue());
        } finally {
            agent.destroyForcibly();
        }
    }
}
