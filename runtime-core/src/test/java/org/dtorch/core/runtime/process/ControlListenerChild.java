package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A second node for {@link ControlHandshakeJvmTest}: listens on loopback with the token in the file {@code args[0]},
 * prints {@code LISTENING port}, then {@code PEER address} for the authenticated connection (to which it writes the
 * byte 42) and {@code REFUSED message} for the refused one, and exits with 0 after one of each (1 after 30 s without).
 */
final class ControlListenerChild {
    static final int GREETING = 42;

    private ControlListenerChild() {
    }

    public static void main(String[] args) throws Exception {
        ClusterToken token = ClusterToken.fromFile(Path.of(args[0]));
        CountDownLatch seen = new CountDownLatch(2);
        try (ControlListener listener = ControlListener.open(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), token,
            Duration.ofSeconds(5), socket -> {
                try (Socket s = socket) {
                    s.getOutputStream().write(GREETING);
                    System.out.println("PEER " + s.getRemoteSocketAddress());
                } catch (IOException e) {
                    System.out.println("PEER failed: " + e);
                }
                seen.countDown();
            }, refused -> {
                System.out.println("REFUSED " + refused.getMessage());
                seen.countDown();
            })) {
            System.out.println("LISTENING " + listener.address().getPort());
            System.exit(seen.await(30, TimeUnit.SECONDS) ? 0 : 1);
        }
    }
}
