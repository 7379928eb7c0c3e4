package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.function.Consumer;

/**
 * The port on which a node accepts control connections from the other nodes of its run. Every connection runs the
 * listener's side of {@link ControlHandshake} on a virtual thread of its own, so a slow or silent client delays nobody
 * else; an authenticated socket goes to {@code onPeer}, which owns it from then on (its {@link Socket#getChannel()
 * channel} is what a {@link ControlChannel} takes). A connection that fails the handshake (garbage, half a frame,
 * silence past the deadline, a wrong token) is closed before any of its bytes is taken for a control frame, logged as a
 * WARNING naming its address, and reported to {@code onRefused}; the listener goes on serving. At most {@value
 * #MAX_PENDING} handshakes run at once; a connection beyond them is closed at once.
 *
 * <p>The socket binds to the address given and nothing wider: a loopback address stays reachable from this host only.
 *
 * <p>Thread-safe: the callbacks run on the handshakes' threads, concurrently; {@link #close} may be called from any
 * thread.
 */
public final class ControlListener implements AutoCloseable {
    /** Handshakes that may run at once. */
    public static final int MAX_PENDING = 64;
    private static final Duration ACCEPT_RETRY = Duration.ofMillis(100);
    private static final System.Logger LOG = System.getLogger(ControlListener.class.getName());

    private final ServerSocket server;
    private final ClusterToken token;
    private final Duration handshakeTimeout;
    private final Consumer<Socket> onPeer;
    private final Consumer<ProtocolException> onRefused;
    private final Semaphore pending = new Semaphore(MAX_PENDING);
    /** Sockets whose handshake runs: closed by {@link #close}, so no handshake outlives the listener. */
    private final Set<Socket> handshaking = ConcurrentHashMap.newKeySet();
    private final Thread acceptor;

    private ControlListener(ServerSocket server, ClusterToken token, Duration handshakeTimeout, Consumer<Socket> onPeer,
        Consumer<ProtocolException> onRefused) {
        this.server = server;
        this.token = token;
        this.handshakeTimeout = handshakeTimeout;
        this.onPeer = onPeer;
        this.onRefused = onRefused;
        this.acceptor = Thread.ofPlatform().daemon().name("dtorch-control-listener-" + server.getLocalPort()).unstarted(this::acceptLoop);
    }

    /**
     * Binds to {@code address} (port 0 picks a free one) and starts accepting.
     *
     * @param handshakeTimeout how long a client has to complete the handshake
     * @param onPeer           receives each authenticated socket, and owns it
     * @param onRefused        hears of each refused connection (the exception names its address and why)
     * @throws IOException if the address cannot be bound
     */
    public static ControlListener open(InetSocketAddress address, ClusterToken token, Duration handshakeTimeout,
        Consumer<Socket> onPeer, Consumer<ProtocolException> onRefused) throws IOException {
        ServerSocket server = ServerSocketChannel.open().socket(); // so that every accepted socket has its channel
        try {
            server.bind(address);
        } catch (IOException e) {
            server.close();
            throw new IOException("cannot listen for control connections on " + address + ": " + e.getMessage(), e);
        }
        ControlListener listener = new ControlListener(server, token, handshakeTimeout, onPeer, onRefused);
        listener.acceptor.start();
        return listener;
    }

    /** The address bound (with the port picked, if 0 was given). */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.getLocalSocketAddress();
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            Socket socket;
            try {
                socket = server.accept();
            } catch (IOException e) {
                if (!server.isClosed()) {
                    LOG.log(System.Logger.Level.WARNING, "accepting on " + address() + " failed", e);
                    pause(); // such a failure (too many open files) repeats until something is closed
                }
                continue;
            }
            if (!pending.tryAcquire()) {
                LOG.log(System.Logger.Level.WARNING, "refused the control connection from " + socket.getRemoteSocketAddress() + ": "
                    + MAX_PENDING + " handshakes are running already");
                closeQuietly(socket);
                continue;
            }
            handshaking.add(socket);
            Thread.ofVirtual().name("dtorch-control-handshake").start(() -> handshake(socket));
        }
    }

    private void handshake(Socket socket) {
        boolean authenticated = false;
        try {
            ControlHandshake.accept(socket, token, handshakeTimeout);
            authenticated = handshaking.remove(socket);
        } catch (WrongTokenException e) {
            onRefused.accept(e); // ControlHandshake logged it
        } catch (ProtocolException e) {
            LOG.log(System.Logger.Level.WARNING, "control connection refused: " + e.getMessage());
            onRefused.accept(e);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "the control connection from " + socket.getRemoteSocketAddress() + " failed during "
                + "the handshake: " + e);
        } finally {
            pending.release();
            if (!authenticated) {
                handshaking.remove(socket);
                closeQuietly(socket);
            }
        }
        if (authenticated) {
            onPeer.accept(socket);
        }
    }

    private static void pause() {
        try {
            Thread.sleep(ACCEPT_RETRY);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }

    /** Stops accepting, closes the connections still in their handshake and waits up to 1 s for the acceptor. */
    @Override
    public void close() {
        try {
            server.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        handshaking.forEach(ControlListener::closeQuietly);
        try {
            acceptor.join(Duration.ofSeconds(1));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
