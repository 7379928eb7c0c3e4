package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A failure reaches the client with the kind recorded where it happened, on real worker threads;
 * {@link FailureKindsInProcessesTest} runs the same with worker processes, where the kind crosses the control
 * channel and the failure board.
 */
@Timeout(120)
class FailureKindsTest {

    boolean processes() {
        return false;
    }

    private DTorch start(Duration timeout) {
        return TestOps.twoDevices(processes(), timeout);
    }

    /**
     * The runtime of a test that only issues operators, failing ones included, and leaves the runtime as usable as it
     * found it: one of its own here; {@link FailureKindsInProcessesTest} takes {@link SharedWorkerProcesses}'
     * instead of starting worker JVMs for the test. Closed with {@link SharedWorkerProcesses#closeUnlessShared}.
     */
    DTorch startForOperators() {
        return start(Duration.ofSeconds(30));
    }

    @Test
    void shouldReportAKernelThatThrowsAsAKernelFailure() {
        DTorch dt = startForOperators();
        try {
            DTensor failed = dt.apply(new TestOps.FailOn(0), dt.ones(new long[] {2}, dt.mesh(0)));
            FutureFailedException e = assertThrows(FutureFailedException.class, () -> failed.toTorchAsync().get());
            assertEquals(FailureKind.KERNEL, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains("boom on purpose"), e.getMessage());
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldReportAFailureDownstreamOfAKernelAsAKernelFailure() {
        DTorch dt = startForOperators();
        try {
            DTensor x = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            // The failure on device 0 reaches the other devices through the redistribution's collective and the registry.
            DTensor failed = dt.apply(new TestOps.FailOn(0), x).redistribute(Placement.replicate()).sum();
            FutureFailedException e = assertThrows(FutureFailedException.class, () -> failed.toTorchAsync().get());
            assertEquals(FailureKind.KERNEL, FailureKind.of(e), e.getMessage());
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldFailATensorWrittenFromAFailedOneInsteadOfKeepingItsOldValues() {
        DTorch dt = startForOperators();
        try {
            // copy_, an in-place overload (add_) and a multi-tensor step (_foreach_add_) each write their target from a
            // tensor whose kernel failed on device 0: the write never happened there, so reading the target must fail
            // with that failure, not return the values it had.
            DTensor copied = dt.zeros(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            DTensor added = dt.zeros(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            DTensor stepped = dt.zeros(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            DTensor failed = dt.apply(new TestOps.FailOn(0), dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0)));
            copied.copy_(failed);
            dt.aten(GenericOpsTest.call("add_", "T,T", null, null), added, failed);
            dt.aten(GenericOpsTest.call("_foreach_add_", "[T],[T]", java.util.Collections.nCopies(1, null), java.util.Collections.nCopies(1, null)),
                stepped, failed);
            for (DTensor written : java.util.List.of(copied, added, stepped)) {
                FutureFailedException e = assertThrows(FutureFailedException.class, () -> written.toTorchAsync().get());
                assertEquals(FailureKind.KERNEL, FailureKind.of(e), e.getMessage());
                assertTrue(e.getMessage().contains("boom on purpose"), e.getMessage());
            }
            try (DTensor fresh = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
                 org.bytedeco.pytorch.Tensor back = fresh.toTorch()) {
                assertEquals(4.0, back.sum().item_double(), "the runtime goes on");
            }
        } finally {
            SharedWorkerProcesses.closeUnlessShared(dt);
        }
    }

    @Test
    void shouldReportAWaitPastTheRuntimeTimeoutAsATimeout() {
        try (DTorch dt = start(Duration.ofSeconds(1))) {
            DTensor x = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
            assertTrue(dt.syncFuture().waitFor(Duration.ofSeconds(60)), "the devices are up");
            TensorFuture slow = dt.apply(new TestOps.StallOn(0, 4_000, false), x).toTorchAsync();
            CommTimeoutException e = assertThrows(CommTimeoutException.class, slow::get);
            assertEquals(FailureKind.TIMEOUT, FailureKind.of(e), e.getMessage());
        }
    }

    @Test
    void shouldReportWorkThatTheShutdownCancelledAsCancelled() {
        DTorch dt = start(Duration.ofSeconds(30));
        TensorFuture after;
        try {
            DTensor x = dt.ones(new long[] {2}, dt.mesh(0));
            assertTrue(dt.syncFuture().waitFor(Duration.ofSeconds(60)), "the devices are up");
            dt.apply(new TestOps.StallOn(0, 2_500, true), x);
            after = dt.ones(new long[] {2}, dt.mesh(0)).toTorchAsync();
        } finally {
            dt.close();
        }
        FutureFailedException e = assertThrows(FutureFailedException.class, after::get);
        assertEquals(FailureKind.CANCELLED, FailureKind.of(e), e.getMessage());
        assertTrue(e.getMessage().contains("closed before this operator ran"), e.getMessage());
    }
}
