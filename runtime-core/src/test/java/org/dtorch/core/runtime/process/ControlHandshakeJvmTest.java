package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Map;
import org.dtorch.core.testing.ChildJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The handshake between two JVMs over loopback: the same token gets through, another token is refused on both. */
@Tag("multinode")
@Timeout(60)
class ControlHandshakeJvmTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    @Test
    void shouldAuthenticateAnotherJvmAndRefuseAWrongTokenOnBothSides(@TempDir Path dir) throws Exception {
        String secret = "a token shared by the two nodes";
        Path file = dir.resolve("token");
        Files.writeString(file, secret + "\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        try (ChildJvm node = ChildJvm.start("listening node", ControlListenerChild.class, Map.of(), file.toString())) {
            int port = Integer.parseInt(node.awaitLine("LISTENING ", WAIT).substring("LISTENING ".length()));
            InetSocketAddress address = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
            try (Socket socket = ControlHandshake.connect(address, ClusterToken.of(secret, "the test"), WAIT)) {
                socket.setSoTimeout((int) WAIT.toMillis());
                assertEquals(ControlListenerChild.GREETING, socket.getInputStream().read());
                assertEquals("PEER " + socket.getLocalSocketAddress(), node.awaitLine("PEER ", WAIT));
            }
            WrongTokenException e = assertThrows(WrongTokenException.class,
                () -> ControlHandshake.connect(address, ClusterToken.of("a token of some other run", "the test"), WAIT));
            assertEquals("node at " + address + " presented a wrong token", e.getMessage());
            String refused = node.awaitLine("REFUSED ", WAIT);
            assertTrue(refused.matches("REFUSED node at /127\\.0\\.0\\.1:\\d+ refused our token: the nodes hold different tokens"), refused);
            node.awaitSuccess(WAIT);
        }
    }
}
