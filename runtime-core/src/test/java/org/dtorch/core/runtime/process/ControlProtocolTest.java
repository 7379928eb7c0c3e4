package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.EOFException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.PromiseSpec;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The control protocol's encoding rejects every malformed, truncated or corrupted message. */
@Timeout(60)
class ControlProtocolTest {

    private static Operator syncOperator(long id) {
        VoidPromise promise = TensorPromises.createVoid(TensorPromiseType.FILE);
        return Operator.remote(id, PromiseSpec.sync(promise, 0), List.of(), List.of());
    }

    @Test
    void shouldRoundTripOperatorsAndTensors() {
        Operator op = syncOperator(7);
        OperatorCodec.Encoded encoded = OperatorCodec.encode(op, "unused");
        Operator back = OperatorCodec.decode(new WireReader(encoded.bytes(), 0, encoded.bytes().length), (id, cause) -> { });
        assertEquals(7, back.id());
        assertEquals("sync", back.spec().name());
        assertEquals(List.of(0L), back.devices());

        Sharding sharding = Sharding.of(DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp")),
            Placement.shard(1), Placement.partial());
        WireWriter out = new WireWriter();
        MetaCodec.writeMeta(out, new TensorMeta(new long[] {4, 6}, org.bytedeco.pytorch.global.torch.ScalarType.BFloat16, sharding));
        try (Tensor small = TestTensors.full(3f, 5, 7); Tensor large = TestTensors.full(2f, 1 << 17)) {
            out.putTensor(small, "unused");
            String region = "dtorch-" + org.dtorch.core.communication.GlobalCommInstanceId.processPrefix() + "-proto-t0";
            out.putTensor(large, region);
            byte[] bytes = out.toByteArray();
            WireReader in = new WireReader(bytes, 0, bytes.length);
            TensorMeta meta = MetaCodec.readMeta(in, "meta");
            assertEquals(sharding, meta.sharding());
            assertArrayEquals(new long[] {4, 6}, meta.shape());
            try (Tensor a = in.getTensor("small"); Tensor b = in.getTensor("large")) {
                assertTrue(TestTensors.same(small, a) && TestTensors.same(large, b));
            }
            in.expectEnd("test");
            new OperatorCodec.Encoded(bytes, out.resources()).release();
            assertTrue(!org.dtorch.core.shm.SharedRegion.exists(region), "releasing a message removes its shared memory");
        }
    }

    @Test
    void shouldRejectEveryTruncationOfAnOperator() {
        Operator op = syncOperator(9);
        byte[] bytes = OperatorCodec.encode(op, "unused").bytes();
        for (int length = 0; length < bytes.length; length++) {
            int n = length;
            ProtocolException e = assertThrows(ProtocolException.class,
                () -> OperatorCodec.decode(new WireReader(bytes, 0, n), (id, cause) -> { }), "a prefix of " + n + " bytes");
            assertTrue(e.getMessage().contains("truncated") || e.getMessage().contains("tag") || e.getMessage().contains("promise"),
                e.getMessage());
        }
        byte[] longer = java.util.Arrays.copyOf(bytes, bytes.length + 3);
        ProtocolException trailing = assertThrows(ProtocolException.class,
            () -> OperatorCodec.decode(new WireReader(longer, 0, longer.length), (id, cause) -> { }));
        assertTrue(trailing.getMessage().contains("unexpected bytes"), trailing.getMessage());
    }

    @Test
    void shouldRejectUnknownTagsCodesAndCounts() {
        byte[] unknownTag = new WireWriter().putLong(1).putString("nobody.knows").toByteArray();
        assertTrue(assertThrows(ProtocolException.class, () -> OperatorCodec.decode(new WireReader(unknownTag, 0, unknownTag.length),
            (id, cause) -> { })).getMessage().contains("unknown operator tag 'nobody.knows'"));
        byte[] badDtype = new WireWriter().putInt(12345).toByteArray();
        assertTrue(assertThrows(ProtocolException.class, () -> new WireReader(badDtype, 0, badDtype.length).getDtype("dtype"))
            .getMessage().contains("unknown dtype code 12345"));
        byte[] hugeCount = new WireWriter().putInt(Integer.MAX_VALUE).toByteArray();
        assertTrue(assertThrows(ProtocolException.class, () -> new WireReader(hugeCount, 0, hugeCount.length).getLongs("ids"))
            .getMessage().contains("outside"));
        byte[] badPlacement = new WireWriter().putByte(0).putInts(new int[] {1}).putLongs(new long[] {0}).putInt(0).putInt(1).putByte(9)
            .toByteArray();
        assertTrue(assertThrows(ProtocolException.class, () -> MetaCodec.readSharding(new WireReader(badPlacement, 0, badPlacement.length),
            "s")).getMessage().contains("unknown placement tag 9"));
        byte[] badMesh = new WireWriter().putByte(0).putInts(new int[] {2}).putLongs(new long[] {0, 0}).putInt(0).putInt(1).putByte(0)
            .toByteArray();
        assertThrows(ProtocolException.class, () -> MetaCodec.readSharding(new WireReader(badMesh, 0, badMesh.length), "s"),
            "a mesh with a repeated device");
    }

    @Test
    void shouldRejectCorruptedFramesBeforeDecodingThem(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("c.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(path));
            SocketChannel client = SocketChannel.open(StandardProtocolFamily.UNIX);
            client.connect(UnixDomainSocketAddress.of(path));
            SocketChannel accepted = server.accept();
            try (ControlChannel sender = new ControlChannel(client, "test sender"); ControlChannel receiver = new ControlChannel(accepted,
                "test receiver")) {
                byte[] payload = OperatorCodec.encode(syncOperator(3), "unused").bytes();
                sender.send(ControlChannel.OPERATOR, payload);
                ControlChannel.Frame ok = receiver.receive();
                assertEquals(ControlChannel.OPERATOR, ok.type());
                assertEquals(payload.length, ok.length());

                Random random = new Random(42);
                for (int trial = 0; trial < 20; trial++) {
                    ByteBuffer frame = frameOf(ControlChannel.OPERATOR, payload);
                    int at = 8 + random.nextInt(frame.limit() - 12); // somewhere in type or payload
                    frame.put(at, (byte) (frame.get(at) ^ (1 << random.nextInt(8))));
                    client.write(frame);
                    ProtocolException e = assertThrows(ProtocolException.class, receiver::receive);
                    assertTrue(e.getMessage().contains("checksum") || e.getMessage().contains("unknown type"), e.getMessage());
                }
                ByteBuffer wrongMagic = frameOf(ControlChannel.OPERATOR, payload);
                wrongMagic.putInt(4, 0x12345678);
                client.write(wrongMagic);
                assertTrue(assertThrows(ProtocolException.class, receiver::receive).getMessage().contains("magic"));
                ByteBuffer oversized = ByteBuffer.allocate(4).putInt(0, ControlChannel.MAX_FRAME + 1);
                client.write(oversized);
                assertTrue(assertThrows(ProtocolException.class, receiver::receive).getMessage().contains("outside"));
                ByteBuffer cut = frameOf(ControlChannel.OPERATOR, payload);
                cut.limit(cut.limit() - 5);
                client.write(cut);
                client.shutdownOutput();
                assertTrue(assertThrows(ProtocolException.class, receiver::receive).getMessage().contains("truncated frame"));
                assertThrows(EOFException.class, receiver::receive);
            }
        }
        Files.deleteIfExists(path);
    }

    /** A well-formed frame, as {@link ControlChannel#queue} writes it. */
    static ByteBuffer frameOf(byte type, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(4 + 4 + 1 + payload.length + 4);
        b.putInt(b.capacity() - 4).putInt(ControlChannel.MAGIC).put(type).put(payload);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(b.array(), 4, b.capacity() - 8);
        b.putInt((int) crc.getValue());
        return b.flip();
    }
}
