package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.PromiseSpec;
import org.dtorch.core.shm.OwnedPaths;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A real worker process driven by this test as its controller: a malformed, truncated or corrupted message
 * is reported and never executed, and nothing after it runs either.
 */
@Tag("multiprocess")
@Timeout(120)
class WorkerProtocolTest {

    private record Sync(VoidPromise promise, VoidFuture future, byte[] bytes) {
        static Sync of(long id) {
            VoidPromise promise = TensorPromises.createVoid(TensorPromiseType.FILE);
            Operator op = Operator.remote(id, PromiseSpec.sync(promise, 0), List.of(), List.of());
            return new Sync(promise, promise.getFuture(), OperatorCodec.encode(op, "unused").bytes());
        }
    }

    /**
     * A frame that fails its checksum (refused by the channel) and a message of an unknown tag (refused by the decoder):
     * each way a worker refuses a message, one worker JVM each, since the worker exits on the first.
     */
    @ParameterizedTest
    @ValueSource(strings = {"checksum", "unknown-tag"})
    void shouldReportAMalformedMessageAndRunNothingAfterIt(String corruption) throws Exception {
        reportsAndRunsNothingAfter(corruption);
    }

    /**
     * Tagged {@code slow}: a truncated message takes the decoder's way out, as the unknown tag does above in every build,
     * and {@link ControlProtocolTest#shouldRejectEveryTruncationOfAnOperator} refuses every truncation in every build.
     */
    @ParameterizedTest
    @ValueSource(strings = {"truncated"})
    @Tag("slow")
    void shouldReportATruncatedMessageAndRunNothingAfterIt(String corruption) throws Exception {
        reportsAndRunsNothingAfter(corruption);
    }

    private static void reportsAndRunsNothingAfter(String corruption) throws Exception {
        String instance = ShmFiles.freshInstance("wp");
        Path socket = WorkerPool.socketPath(instance);
        OwnedPaths.createPrivateDirectory(socket.getParent(), "test socket's directory");
        try (SharedFailureBoard board = SharedFailureBoard.create(SharedRegion.PREFIX + instance + "-failures");
             ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
             ChildJvm worker = startWorker(server, socket, instance, board)) {
            SocketChannel raw = acceptWithin(server, Duration.ofSeconds(60), worker);
            try (ControlChannel channel = new ControlChannel(raw, "the worker")) {
                ControlChannel.Frame hello = channel.receive();
                assertEquals(ControlChannel.HELLO, hello.type());

                Sync first = Sync.of(1);
                channel.send(ControlChannel.OPERATOR, first.bytes());
                assertTrue(first.future().waitFor(Duration.ofSeconds(30)), "a valid operator runs");
                Sync bad = Sync.of(2);
                Sync after = Sync.of(3);
                String expected = switch (corruption) {
                    case "checksum" -> {
                        ByteBuffer frame = frameOf(bad.bytes());
                        frame.put(20, (byte) (frame.get(20) ^ 0x10));
                        raw.write(frame);
                        yield "fails its checksum";
                    }
                    case "truncated" -> {
                        channel.send(ControlChannel.OPERATOR, Arrays.copyOf(bad.bytes(), bad.bytes().length - 3));
                        yield "truncated message";
                    }
                    default -> {
                        channel.send(ControlChannel.OPERATOR, new WireWriter().putLong(2).putString("nobody.knows").toByteArray());
                        yield "unknown operator tag 'nobody.knows'";
                    }
                };
                channel.send(ControlChannel.OPERATOR, after.bytes());
                String fatal = null;
                while (fatal == null) {
                    ControlChannel.Frame frame;
                    try {
                        frame = channel.receive();
                    } catch (java.io.IOException e) {
                        throw new AssertionError("the worker broke the channel instead of reporting; its output:\n" + worker.output(), e);
                    }
                    if (frame.type() == ControlChannel.FATAL) {
                        WireReader in = frame.reader();
                        fatal = in.getString("fatal");
                    }
                }
                assertTrue(fatal.contains("rejected a control message") && fatal.contains(expected), fatal);
                assertEquals(WorkerMain.EXIT_PROTOCOL, worker.awaitExit(Duration.ofSeconds(30)));
                assertFalse(bad.future().isReady() || after.future().isReady(), "nothing after the bad message ran");
            }
        } finally {
            SharedRegion.unlink(SharedRegion.PREFIX + instance + "-failures");
            Files.deleteIfExists(socket);
            Files.deleteIfExists(socket.getParent());
        }
        assertEquals(List.of(), ShmFiles.of(instance).stream().filter(n -> !n.contains("-pr-")).toList());
    }

    private static ChildJvm startWorker(ServerSocketChannel server, Path socket, String instance, SharedFailureBoard board)
        throws Exception {
        server.bind(UnixDomainSocketAddress.of(socket));
        server.configureBlocking(false);
        return ChildJvm.start("worker", WorkerMain.class, Map.of(GlobalCommInstanceId.PROPERTY, instance), "--socket", socket.toString(),
            "--device", "0", "--devices", "1", "--instance", instance, "--failures", board.name(), "--timeout-ms", "30000",
            "--same-device", "false");
    }

    private static SocketChannel acceptWithin(ServerSocketChannel server, Duration timeout, ChildJvm worker) throws IOException {
        SocketChannel[] accepted = {null};
        Await.until(() -> {
            try {
                accepted[0] = server.accept();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return accepted[0] != null;
        }, timeout, () -> "the worker connects; its output:\n" + worker.output());
        accepted[0].configureBlocking(true);
        return accepted[0];
    }

    private static ByteBuffer frameOf(byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(4 + 4 + 1 + payload.length + 4);
        b.putInt(b.capacity() - 4).putInt(ControlChannel.MAGIC).put(ControlChannel.OPERATOR).put(payload);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(b.array(), 4, b.capacity() - 8);
        b.putInt((int) crc.getValue());
        return b.flip();
    }
}
