package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousClient;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A run across two nodes of two devices each (two JVMs of this machine that share nothing but 127.0.0.1): the same
 * answers as threads, a kernel failure on one node carried to the other, strangers on the control port refused. The
 * cases share one run, which must stay usable through all of them; when it ends, no node keeps its shared memory.
 */
@Tag("multinode")
@Timeout(180)
class AcrossNodesSmokeTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static TwoNodes.Run run;

    @BeforeAll
    static void startTwoNodes() {
        run = TwoNodes.start(2, 2, TIMEOUT);
    }

    @AfterAll
    static void endTheRunLeavingNoSharedMemory() {
        String instance = run.dt().runtime().instanceId();
        run.close();
        assertEquals(List.of(), TwoNodes.sharedMemoryOf(instance), "the run's shared memory is gone on every node");
    }

    @Test
    void shouldComputeAcrossTwoNodesAsThreadsDo() {
        String threads;
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(30)).build())) {
            threads = ProcessModeSmokeTest.mlp(dt);
        }
        DTorch dt = run.dt();
        assertEquals(4, dt.defaultMesh().count());
        DTensor a = dt.arange(0, 8, 1, torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
        DTensor b = dt.full(10, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
        DTensor c = a.add(b).mul(2.0);
        try (Tensor result = c.toTorch(); Tensor total = c.sum().toTorch()) {
            assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
            assertEquals(216.0, total.item_double());
        }
        try (Tensor host = torch.rand(new long[] {512, 512})) {
            DTensor big = dt.tensor(host, dt.defaultMesh(), Placement.shard(1));
            try (Tensor back = big.redistribute(Placement.replicate()).toTorch()) {
                assertTrue(host.equal(back), "a 1 MiB tensor must come back unchanged");
            }
        }
        assertEquals(threads, ProcessModeSmokeTest.mlp(dt), "a 2 x 2 mesh with one node per row, bit for bit as threads");
        IllegalArgumentException channel = assertThrows(IllegalArgumentException.class, () -> dt.channel(dt.mesh(0, 1), dt.mesh(2, 3)));
        assertTrue(channel.getMessage().contains("device 2 of") && channel.getMessage().contains("is on node 1"), channel.getMessage());
        dt.sync();
    }

    /**
     * A kernel that fails on a device of node 1 reaches node 0 through the collective after it: node 1 recorded the
     * failure in the run's rendezvous before it sent its placeholder data, and node 0 looks there after every kernel that
     * communicated. Then garbage on the control port is refused and the run goes on.
     */
    @Test
    void shouldCarryAFailureAcrossNodesAndRefuseGarbageOnTheControlPort() throws Exception {
        String published;
        try (RendezvousClient rendezvous = RendezvousClient.connect(new RendezvousAddress("127.0.0.1", run.port()),
            Deadline.after(TIMEOUT), "the test")) {
            published = rendezvous.await("dtorch/control", Deadline.after(TIMEOUT), "the control port");
        }
        DTorch dt = run.dt();
        DTensor x = dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0));
        DTensor failed = dt.apply(new TestOps.FailOn(3), x).redistribute(Placement.replicate()).sum();
        FutureFailedException e = assertThrows(FutureFailedException.class, () -> failed.toTorchAsync().get());
        assertEquals(FailureKind.KERNEL, FailureKind.of(e), e.getMessage());
        assertTrue(e.getMessage().contains("boom on purpose"), e.getMessage());
        RendezvousAddress control = RendezvousAddress.parse(published.split("\t")[0]);
        byte[] garbage = "GET / HTTP/1.1\r\nHost: dtorch\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
        // A frame header that promises 1 KiB, then a few bytes and a close; then garbage; then silence.
        byte[] truncated = ByteBuffer.allocate(12).putInt(1024).putInt(0x44544131).put((byte) 1).put(new byte[3]).array();
        for (byte[] bytes : List.of(truncated, garbage, new byte[0])) {
            try (Socket stranger = new Socket(control.host(), control.port())) {
                OutputStream out = stranger.getOutputStream();
                out.write(bytes);
                out.flush();
                stranger.shutdownOutput();
                assertEquals(-1, stranger.getInputStream().read(), "the listener closes a connection it refused");
            } catch (IOException closedFirst) {
                // the listener may close before our write completes: refused all the same
            }
        }
        x = dt.full(3, new long[] {6, 2}, dt.defaultMesh(), Placement.shard(0));
        try (Tensor value = x.redistribute(Placement.replicate()).sum().toTorch()) {
            assertEquals(36.0, value.item_double(), "the run goes on, its nodes still connected");
        }
        assertEquals(null, dt.runtime().brokenBy());
    }
}
