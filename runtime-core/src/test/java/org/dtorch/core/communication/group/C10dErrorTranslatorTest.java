package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.time.Duration;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.junit.jupiter.api.Test;

/**
 * How a native c10d failure becomes a {@link CommException}: the clock decides its kind (a failure after the whole
 * timeout is a timeout, anything sooner a communication failure), and the message keeps the first line of c10d's text
 * without its source-file prefix. The failures themselves are JavaCPP's: a plain {@link RuntimeException} with
 * {@code what()} as its message, which is what these tests hand in. Real groups failing for real are in
 * {@code ThreadGroupFailureTest}.
 */
class C10dErrorTranslatorTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final RuntimeException PEER_CLOSED = new RuntimeException(
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:41234\n"
            + "Exception raised from ... (most recent call first):");

    @Test
    void shouldCallAQuickFailureACommunicationFailureWithoutC10dsSourcePrefix() {
        C10dErrorTranslator errors = new C10dErrorTranslator("gloo", "cpu-0_1", 1, 2, null, TIMEOUT);
        CommException e = errors.translate("allReduce(sum)", PEER_CLOSED, System.nanoTime());
        assertFalse(e instanceof CommTimeoutException, e.getMessage());
        assertEquals(FailureKind.COMMUNICATION, e.kind());
        assertEquals("gloo failed: Connection closed by peer [127.0.0.1]:41234", e.getMessage());
        assertSame(PEER_CLOSED, e.getCause());
    }

    @Test
    void shouldCallAFailureAfterTheWholeTimeoutATimeout() {
        C10dErrorTranslator errors = new C10dErrorTranslator("nccl", "cuda-0_1", 0, 2, null, TIMEOUT);
        long issued = System.nanoTime() - TIMEOUT.toNanos();
        CommException e = errors.translate("barrier", new RuntimeException("Timed out waiting 30000ms for recv"), issued);
        assertInstanceOf(CommTimeoutException.class, e);
        assertEquals(FailureKind.TIMEOUT, e.kind());
        assertEquals("timed out after 30 s waiting for the other ranks (nccl: Timed out waiting 30000ms for recv)", e.getMessage());
    }

    @Test
    void shouldNameWhatARingStepWaitedFor() {
        C10dErrorTranslator errors = new C10dErrorTranslator("gloo", "cpu-0_1_2", 2, 3, null, TIMEOUT);
        String waitingFor = "the receive of chunk 1 from rank 1";
        assertEquals("gloo failed in " + waitingFor + ": Connection closed by peer [127.0.0.1]:41234",
            errors.translate("allReduce(sum)", waitingFor, PEER_CLOSED, System.nanoTime()).getMessage());
        assertEquals("timed out after 30 s waiting for " + waitingFor + " (gloo: Connection closed by peer [127.0.0.1]:41234)",
            errors.translate("allReduce(sum)", waitingFor, PEER_CLOSED, System.nanoTime() - TIMEOUT.toNanos()).getMessage());
    }

    @Test
    void shouldNameTheGroupAndTheRendezvousOfAFailedConnection() {
        RendezvousAddress rendezvous = new RendezvousAddress("node-0", 29500);
        C10dErrorTranslator errors = new C10dErrorTranslator("gloo", "cpu-0_1", 1, 2, rendezvous, TIMEOUT);
        assertEquals("group cpu-0_1 (rank 1 of 2, gloo over the rendezvous " + rendezvous + ")", errors.described());
        assertEquals("connect to " + errors.described() + ": gloo failed: Connection closed by peer [127.0.0.1]:41234",
            errors.translate(C10dErrorTranslator.CONNECT, PEER_CLOSED, System.nanoTime()).getMessage());
        assertEquals("group cpu-0_1 (rank 1 of 2, gloo)", new C10dErrorTranslator("gloo", "cpu-0_1", 1, 2, null, TIMEOUT).described());
    }
}
