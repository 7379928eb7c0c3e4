package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.process.WorkerDiedException;
import org.dtorch.core.shm.SharedRegion;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Per-device-process mode when a worker is killed: clear errors, no hang, nothing left behind. Two devices: a death is
 * noticed, reported and cleaned up the same way among two workers as among four, and each test needs a runtime of its
 * own, since it kills a worker or checks what its close leaves.
 */
@Tag("multiprocess")
@Timeout(180)
class ProcessFaultsTest {

    /** The kernels' deadline: what a death that went unnoticed would cost. Time bounds below are fractions of it. */
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private static DTorch start() {
        return DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(true).timeout(TIMEOUT)
            .shutdownTimeout(Duration.ofSeconds(5)).build());
    }

    /** The shared-memory files of runtime {@code instanceId} that are still there. */
    static List<String> filesOf(String instanceId) throws IOException {
        try (Stream<Path> files = Files.list(SharedRegion.directory())) {
            return files.map(p -> p.getFileName().toString()).filter(n -> n.startsWith(SharedRegion.PREFIX + instanceId + "-")).toList();
        }
    }

    @Test
    void shouldFailEveryPendingFutureNamingTheKilledDeviceAndItsExitStatus(@TempDir Path dir) throws Exception {
        DTorch dt = start();
        String instance = dt.runtime().instanceId();
        long victim = dt.runtime().workerPids().get(1L);
        List<TensorFuture> futures = new ArrayList<>();
        try {
            DTensor x = dt.ones(new long[] {8, 4}, dt.defaultMesh(), Placement.shard(0));
            try (Tensor warm = x.sum().toTorch()) {
                assertEquals(32.0, warm.item_double());
            }
            // A graph that keeps every device busy for seconds, with collectives between the slow steps.
            DTensor t = x;
            for (int i = 0; i < 20; i++) {
                t = dt.apply(new TestOps.Sleep(150), t).redistribute(Placement.replicate()).redistribute(Placement.shard(0));
                futures.add(t.sum().toTorchAsync());
            }
            // A gate opened only after the kill: some work is still pending then, however slow this machine is.
            Path gate = dir.resolve("open");
            futures.add(dt.apply(new TestOps.Gate(gate.toString(), TIMEOUT.toMillis()), t).sum().toTorchAsync());
            futures.getFirst().waitFor(TIMEOUT).ifPresent(Tensor::close); // the workers are running the graph
            long killedAt = System.nanoTime();
            assertTrue(ProcessHandle.of(victim).orElseThrow().destroyForcibly());
            Files.createFile(gate);
            int failed = 0;
            for (TensorFuture f : futures) {
                try (Tensor value = f.get()) {
                    assertEquals(32.0, value.item_double(), "a future that completes before the kill has the right value");
                } catch (FutureFailedException e) {
                    failed++;
                    WorkerDiedException death = assertInstanceOf(WorkerDiedException.class, e.getCause(), e.getMessage());
                    assertEquals(FailureKind.WORKER_DIED, e.kind(), "the kind is recorded where the death is noticed");
                    assertTrue(death.getMessage().contains("cpu:1 (pid " + victim + ") exited with status 137 (killed by SIGKILL)"),
                        death.getMessage());
                }
            }
            long failedWithinMillis = (System.nanoTime() - killedAt) / 1_000_000;
            assertTrue(failed > 0, "the kill came while work was pending");
            assertTrue(failedWithinMillis < TIMEOUT.toMillis() / 4, "every future completed " + failedWithinMillis
                + " ms after the kill: the death must be noticed, not left to the " + TIMEOUT.toSeconds() + " s deadline");
            assertNotNull(dt.runtime().brokenBy());
            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> x.mul(2.0));
            assertTrue(refused.getMessage().contains("cpu:1"), refused.getMessage());
        } finally {
            long start = System.nanoTime();
            dt.close();
            long closeMillis = (System.nanoTime() - start) / 1_000_000;
            assertTrue(closeMillis < TIMEOUT.toMillis() / 2, "close after a worker death took " + closeMillis + " ms: it must not hang");
        }
        for (long pid : dt.runtime().workerPids().values()) {
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "worker " + pid + " still runs");
        }
        assertEquals(List.of(), filesOf(instance), "shared memory left behind");
        assertFalse(Files.exists(CommPaths.root().resolve(instance)), "rendezvous directory left behind");
    }

    @Test
    void shouldRunAndCleanUpNormallyAfterAnotherRuntimeLostAWorker() throws Exception {
        try (DTorch dt = start()) {
            String instance = dt.runtime().instanceId();
            DTensor x = dt.full(3, new long[] {6, 2}, dt.defaultMesh(), Placement.shard(0));
            try (Tensor value = x.redistribute(Placement.replicate()).sum().toTorch()) {
                assertEquals(36.0, value.item_double());
            }
            dt.close();
            assertEquals(List.of(), filesOf(instance));
        }
    }
}
