package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(180)
class RuntimeBehaviourTest {
    /**
     * Threads that serve every runtime of the process and outlive each: the File-future watcher, the callback pool and
     * the Network store's waiters (which end after a minute idle).
     */
    static final List<String> PROCESS_WIDE = List.of("dtorch-file-futures", "dtorch-callbacks-", "dtorch-network-store-wait-");

    /** Per-device-process mode instead of threads; {@code RuntimeBehaviourInProcessesTest} turns it on. */
    boolean processes() {
        return false;
    }

    DTorchOptions.Builder options() {
        return DTorchOptions.builder().devices(4).perDevicePerProcess(processes()).timeout(Duration.ofSeconds(30));
    }

    private DTorch start(boolean sameDevice) {
        return DTorch.init(options().sameDevice(sameDevice).build());
    }

    /**
     * The runtime of a test that only issues operators, failing ones included, and leaves the runtime as usable as it
     * found it: one of its own here; {@link RuntimeBehaviourInProcessesTest} takes {@link SharedWorkerProcesses}'
     * instead of starting four worker JVMs per test. Closed with {@link SharedWorkerProcesses#closeUnlessShared}.
     */
    DTorch startForOperators() {
        return start(false);
    }

    @Test
    void shouldReturnBeforeASlowKernelFinishes(@TempDir Path dir) throws IOException {
        Path gate = dir.resolve("open");
        DTorch dt = startForOperators();
        try {
            DTensor x = dt.ones(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(0));
            // The kernel runs only once the test creates the gate file: a client that waited for kernels would sit
            // here until the gate's deadline and then find its future failed, not pending.
            DTensor held = dt.apply(new TestOps.Gate(gate.toString(), 30_000), x);
            DTensor after = held.mul(3.0).sum();
            TensorFuture future = after.toTorchAsync();
            assertFalse(future.isReady(), "the value cannot be ready before the held kernel ran");
            Files.createFile(gate);
            try (Tensor value = future.get()) {
                assertEquals(48.0, value.item_double());
            }
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldKeepTheTensorAliveWhileItsFutureIsPending() {
        DTorch dt = startForOperators();
        try {
            DTensor slow = dt.apply(new TestOps.Sleep(300), dt.full(2, new long[] {8}, dt.defaultMesh(), Placement.shard(0)));
            TensorFuture future = dt._GetTensorAsync(slow);
            slow.close();
            assertThrows(IllegalStateException.class, slow::neg, "a closed handle refuses operators");
            try (Tensor value = future.get()) {
                assertEquals("[2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]", TorchTensors.format(value, 16));
            }
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldReturnLiveBlobsAndNativeMemoryToTheirBaseline() {
        returnsToBaselineAfter(10_000);
    }

    @Test
    @Tag("slow")
    void shouldReturnLiveBlobsAndNativeMemoryToTheirBaselineAfterAHundredThousandOperators() {
        returnsToBaselineAfter(100_000);
    }

    private void returnsToBaselineAfter(int operators) {
        try (DTorch dt = start(false)) {
            DTensor base = dt.ones(new long[] {1}, dt.mesh(0));
            dt.sync();
            int blobsBefore = dt.runtime().liveBlobCount();
            long physicalBefore = Pointer.physicalBytes();
            WorkerResources workersBefore = WorkerResources.of(dt);
            DTensor acc = base.add(0.0);
            for (int i = 0; i < operators; i++) {
                DTensor next = acc.add(base);
                acc.close();
                acc = next;
            }
            try (Tensor value = acc.toTorch()) {
                assertEquals(operators + 1.0, value.item_double());
            }
            acc.close();
            dt.sync();
            assertEquals(blobsBefore, dt.runtime().liveBlobCount(), "every dropped handle's tensor must be freed");
            java.lang.ref.Reference.reachabilityFence(base); // else the Cleaner may release base's tensor before the count
            // The device that completed sync's promise hands what it ran to the graph just after.
            Await.until(() -> dt.runtime().pendingOperatorCount() == 0, Duration.ofSeconds(30), "the graph has no pending operator");
            if (processes()) {
                // The controller's resident size follows its heap (encoding garbage) here; what leaks in process
                // mode would be mappings and descriptors in the workers, and tensors, counted above.
                WorkerResources after = WorkerResources.of(dt);
                assertTrue(after.mappings() - workersBefore.mappings() < 64 && after.descriptors() - workersBefore.descriptors() < 16,
                    "worker mappings and descriptors grew from " + workersBefore + " to " + after + " over " + operators + " operators");
            } else {
                long growth = Pointer.physicalBytes() - physicalBefore;
                assertTrue(growth < 200L * 1024 * 1024, "resident memory grew by " + growth / 1024 / 1024 + " MiB over " + operators
                    + " operators");
            }
        }
    }

    @Test
    void shouldFreeForgottenHandlesThroughTheCleaner() {
        try (DTorch dt = start(false)) {
            dt.sync();
            int before = dt.runtime().liveBlobCount();
            for (int i = 0; i < 200; i++) {
                dt.ones(new long[] {16}, dt.defaultMesh(), Placement.shard(0)).mul(2.0);
            }
            Await.until(() -> {
                System.gc();
                dt.sync();
                return dt.runtime().liveBlobCount() <= before;
            }, Duration.ofSeconds(30), "the Cleaner releases forgotten handles");
            assertEquals(before, dt.runtime().liveBlobCount(), "forgotten handles must be released by the Cleaner");
        }
    }

    @Test
    void shouldFailDependentFuturesNamingTheOperatorAndDeviceAndStayUsable() {
        DTorch dt = startForOperators();
        try {
            DeviceMesh mesh = dt.defaultMesh();
            DTensor x = dt.ones(new long[] {8, 4}, mesh, Placement.shard(0));
            DTensor broken = dt.apply(new TestOps.FailOn(2), x);
            // A collective on the broken tensor must not hang: device 2 joins it with placeholder data.
            DTensor gathered = broken.mul(2.0).redistribute(Placement.replicate());
            TensorFuture future = gathered.sum().toTorchAsync();
            FutureFailedException e = assertThrows(FutureFailedException.class, future::get);
            assertTrue(e.getMessage().contains("operator explode#") && e.getMessage().contains("failed on cpu:2")
                && e.getMessage().contains("boom on purpose"), e.getMessage());
            // Unrelated work is unaffected.
            try (Tensor fine = x.mul(3.0).sum().toTorch()) {
                assertEquals(96.0, fine.item_double());
            }
            VoidFuture synced = dt.syncFuture();
            assertTrue(synced.waitFor(Duration.ofSeconds(30)));
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldShutDownCleanlyWithOperatorsInFlight() {
        DTorch dt = DTorch.init(options().shutdownTimeout(Duration.ofMillis(300)).build());
        DTensor x = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
        List<TensorFuture> futures = new ArrayList<>();
        DTensor t = x;
        for (int i = 0; i < 20; i++) {
            t = dt.apply(new TestOps.Sleep(100), t);
            futures.add(t.sum().toTorchAsync());
        }
        dt.close();
        int failed = 0;
        for (TensorFuture f : futures) {
            assertTrue(f.isReady(), "every future is completed, one way or the other, once close() returns");
            try (Tensor value = f.get()) {
                assertEquals(4.0, value.item_double());
            } catch (FutureFailedException cancelled) {
                assertTrue(cancelled.getMessage().contains("closed before this operator ran"), cancelled.getMessage());
                failed++;
            }
        }
        // Close did not wait for the queued work: it cancelled some.
        assertTrue(failed > 0, "with 2 s of queued work and a 300 ms shutdown timeout some operators are cancelled");
        assertThrows(IllegalStateException.class, () -> x.mul(2.0));
        // The File-future watcher serves every runtime of the process and outlives each of them.
        Await.until(() -> runtimeThreads().isEmpty(), Duration.ofSeconds(10), () -> "every runtime thread stops: " + runtimeThreads() + " run");
    }

    private static List<String> runtimeThreads() {
        return SharedWorkerProcesses.notOfTheSharedRuntime(Thread.getAllStackTraces().keySet()).stream()
            .filter(th -> th.getName().startsWith("dtorch-") && PROCESS_WIDE.stream().noneMatch(th.getName()::startsWith) && th.isAlive())
            .map(Thread::getName).toList();
    }

    @Test
    void shouldGiveIdenticalResultsWithTheSameDeviceSimulation() {
        List<String> results = new ArrayList<>();
        for (boolean sameDevice : new boolean[] {false, true}) {
            try (DTorch dt = start(sameDevice)) {
                results.add(ProcessModeSmokeTest.mlp(dt));
            }
        }
        assertEquals(results.get(0), results.get(1), "thread mode and the same-device simulation must agree bit for bit");
    }

    @Test
    void shouldNameWhatIsMissingWhenCudaIsNotAvailable() {
        org.junit.jupiter.api.Assumptions.assumeFalse(org.dtorch.core.device.Cuda.isAvailable(), "CUDA is available here");
        org.dtorch.core.device.CudaUnavailableException e = assertThrows(org.dtorch.core.device.CudaUnavailableException.class,
            () -> DTorch.init(options().devices("cuda:2").build()));
        assertTrue(e.getMessage().contains("cuda:0 is not usable") && e.getMessage().contains("-Pgpu"), e.getMessage());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> options().devices("tpu:2"));
        assertTrue(bad.getMessage().contains("cpu:N or cuda:N"), bad.getMessage());
    }
}
