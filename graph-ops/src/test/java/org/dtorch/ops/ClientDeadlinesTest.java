package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What the client waits on is bounded by the runtime's timeout (not the global 300 s), and callbacks never run
 * on a device's worker or on the File-future watcher. {@link ClientDeadlinesInProcessesTest} runs the same with
 * worker processes.
 */
@Timeout(120)
class ClientDeadlinesTest {

    boolean processes() {
        return false;
    }

    private DTorch start(Duration timeout) {
        return TestOps.twoDevices(processes(), timeout);
    }

    /**
     * The runtime of a test that only issues operators, failing ones included, and leaves the runtime as usable as it
     * found it: one of its own here; {@link ClientDeadlinesInProcessesTest} takes {@link SharedWorkerProcesses}'
     * instead of starting worker JVMs for the test. Closed with {@link SharedWorkerProcesses#closeUnlessShared}.
     */
    DTorch startForOperators() {
        return start(Duration.ofSeconds(30));
    }

    @Test
    void shouldBoundGetAndSyncByTheRuntimeTimeout() {
        try (DTorch dt = start(Duration.ofSeconds(1))) {
            DTensor x = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            assertTrue(dt.syncFuture().waitFor(Duration.ofSeconds(60)), "the workers are up: what follows only waits for the stalled kernel");
            DTensor slow = dt.apply(new TestOps.StallOn(0, 6_000, false), x);
            TensorFuture value = slow.toTorchAsync();
            assertEquals(Duration.ofSeconds(1), value.timeout());
            // get() gives up after the runtime's 1 s: had it waited until the value came, it would have returned the value.
            CommTimeoutException get = assertThrows(CommTimeoutException.class, value::get);
            assertTrue(get.getMessage().contains("timed out after 1 s"), get.getMessage());
            CommTimeoutException sync = assertThrows(CommTimeoutException.class, dt::sync);
            assertTrue(sync.getMessage().contains("timed out after 1 s"), sync.getMessage());
            assertThrows(CommTimeoutException.class, slow::toTorch);
        }
    }

    @Test
    void shouldFailAPromiseWhoseFailureReportBreaksInsteadOfLettingItTimeOut() {
        assumeFalse(processes(), "the test operator's promise lives in this process");
        try (DTorch dt = start(Duration.ofSeconds(20))) {
            DTensor failed = dt.apply(new TestOps.FailOn(0), dt.ones(new long[] {2}, dt.mesh(0)));
            TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY, Duration.ofSeconds(20));
            TensorFuture future = promise.getFuture();
            dt.runtime().graph().add(new TestOps.BrokenReport(promise), List.of(failed.operand()));
            // Failed with the upstream failure, not a timeout at the 20 s deadline.
            FutureFailedException e = assertThrows(FutureFailedException.class, future::get);
            assertTrue(e.getMessage().contains("boom on purpose"), "the future names the upstream failure: " + e.getMessage());
        }
    }

    @Test
    void shouldRunCallbacksOffTheDevicesAndTheWatcher() throws Exception {
        DTorch dt = startForOperators();
        try {
            DTensor a = dt.full(3, new long[] {2}, dt.mesh(0));
            TensorFuture first = dt.apply(new TestOps.StallOn(0, 200, false), a).toTorchAsync();
            TensorFuture second = a.mul(2.0).toTorchAsync(); // same device, after the first
            CountDownLatch secondSeen = new CountDownLatch(1);
            AtomicReference<String> firstThread = new AtomicReference<>();
            // The first value's callback blocks until the second value's callback has run. Were callbacks run by the
            // device's worker (thread mode) or the process's File-future watcher (process mode), the second callback
            // could not run while the first blocks.
            CompletableFuture<Boolean> chained = first.toCompletableFuture().thenApply(value -> {
                firstThread.set(Thread.currentThread().getName());
                try {
                    return secondSeen.await(20, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            CompletableFuture<Double> doubled = second.toCompletableFuture().thenApply(value -> {
                secondSeen.countDown();
                return value.select(0, 0).item_double();
            });
            assertTrue(chained.get(30, TimeUnit.SECONDS), "the blocked callback was released by the other one");
            assertEquals(6.0, doubled.get(30, TimeUnit.SECONDS));
            assertTrue(firstThread.get().startsWith("dtorch-callbacks-"), firstThread.get());
            try (Tensor value = second.get()) { // a blocked callback stalled nothing
                assertEquals(6.0, value.select(0, 1).item_double());
            }
            assertFalse(firstThread.get().startsWith("dtorch-worker"));
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }
}
