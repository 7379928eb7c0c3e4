package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.Operator;
import org.junit.jupiter.api.Test;

/** Where a failure's kind comes from: the type that raised it, never the words of its message. */
class FailureKindTest {
    private static final Operator OP = Operator.remote(1, PromiseSpec.sync(TensorPromises.createVoid(TensorPromiseType.MEMORY), 0),
        List.of(), List.of());

    @Test
    void shouldTakeTheKindFromTheTypeThatRaisedTheError() {
        assertEquals(FailureKind.COMMUNICATION, FailureKind.of(new CommException("a store broke")));
        assertEquals(FailureKind.TIMEOUT, FailureKind.of(new CommTimeoutException("timed out after 1 s")));
        assertEquals(FailureKind.CANCELLED, FailureKind.of(new CommInterruptedException("interrupted", new InterruptedException())));
        assertEquals(FailureKind.CANCELLED, FailureKind.of(new CommException(FailureKind.CANCELLED, "closed", null)));
    }

    @Test
    void shouldNotReadTheKindFromTheMessage() {
        assertEquals(FailureKind.UNKNOWN, FailureKind.of(new RuntimeException("gloo: connection closed by peer")));
        assertEquals(FailureKind.KERNEL, FailureKind.of(OperatorFailedException.kernelFailed(OP, Device.cpu(0),
            new RuntimeException("gloo: connection closed by peer"))));
    }

    @Test
    void shouldKeepTheKindOfACollectiveThatBrokeInsideAKernel() {
        OperatorFailedException e = OperatorFailedException.kernelFailed(OP, Device.cpu(1), new CommException("allReduce: peer gone"));
        assertEquals(FailureKind.COMMUNICATION, e.kind());
        assertEquals(FailureKind.COMMUNICATION, new FutureFailedException("TensorFuture", e).kind());
    }

    @Test
    void shouldHoldOnlyCommunicationFailuresForNewsOfADeadPeer() {
        assertTrue(FailureKind.COMMUNICATION.mayHideADeadPeer());
        for (FailureKind kind : FailureKind.values()) {
            if (kind != FailureKind.COMMUNICATION) {
                assertFalse(kind.mayHideADeadPeer(), kind.name());
            }
        }
        assertEquals(FailureKind.UNKNOWN, FailureKind.fromOrdinal(FailureKind.values().length));
        assertEquals(FailureKind.KERNEL, FailureKind.fromOrdinal(FailureKind.KERNEL.ordinal()));
    }
}
