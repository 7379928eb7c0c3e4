package org.dtorch.core.communication.store;

import java.time.Duration;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.IntOptional;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.promise.StoreListenSocket;

/**
 * A c10d {@code TCPStore} server in this process: the {@link RendezvousAddress} that {@link NetworkTensorStore}s
 * meet at. One serves any number of stores (each keeps its keys under its store key), so a run needs one, started
 * by whoever starts the run (the multi-node runtime's node 0; a test), before the stores are created, and closed
 * after the last of them.
 *
 * <p>It listens on the advertised host's address alone (c10d's server would listen on every interface; it is handed a
 * socket bound by {@link StoreListenSocket}, as the Network promises' servers are), so loopback stays
 * loopback. Like every c10d store it authenticates nobody: anyone who reaches the port can read and write its keys.
 * The network between the hosts must be trusted, or the port closed to others by a firewall
 * (docs/communication-core.md, "NetworkTensorStore").
 *
 * <p>Thread-safe: {@link #close()} may race with nothing else; the address is immutable.
 */
public final class RendezvousServer implements AutoCloseable {
    private final TCPStore server;
    private final RendezvousAddress address;
    private boolean closed;

    private RendezvousServer(TCPStore server, RendezvousAddress address) {
        this.server = server;
        this.address = address;
    }

    /**
     * Starts a server on {@code port} of {@code host}'s address (0: a free port the system picks; {@link #address()}
     * says which); {@code host} is also the name by which the participants reach it.
     *
     * @throws IllegalArgumentException if the host does not resolve or the port is out of range
     * @throws CommException            if the port cannot be bound or the server cannot start
     */
    public static RendezvousServer start(String host, int port) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("rendezvous port must be in [0, 65535] (0: any free port), got " + port);
        }
        new RendezvousAddress(host, Math.max(port, 1)); // validates the host
        StoreListenSocket.Bound socket;
        try {
            socket = StoreListenSocket.listen(host, port);
        } catch (IllegalStateException e) {
            throw new CommException("cannot start the rendezvous server on " + host + ":" + port + ": " + e.getMessage(), e);
        }
        Duration timeout = CommOptions.global().timeout();
        try (TCPStoreOptions options = new TCPStoreOptions(); Milliseconds millis = new Milliseconds(timeout.toMillis());
             IntOptional fd = new IntOptional(socket.fd())) {
            options.port((short) socket.port());
            options.isServer(true);
            options.waitWorkers(false);
            options.timeout(millis);
            options.masterListenFd(fd);
            TCPStore server = new TCPStore(host, options);
            return new RendezvousServer(server, new RendezvousAddress(host, socket.port()));
        } catch (RuntimeException e) {
            StoreListenSocket.close(socket.fd());
            throw new CommException("cannot start the rendezvous server on " + host + ":" + socket.port() + ": "
                + NetworkStoreClients.c10dMessage(e), e);
        }
    }

    /** Where the participants reach this server. */
    public RendezvousAddress address() {
        return address;
    }

    /**
     * Stops the server. Idempotent. Stores still open on it fail their next call (their clients see the connection
     * closed); close them first.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        NetworkStoreClients.forget(address);
        server.close();
    }

    @Override
    public String toString() {
        return "RendezvousServer{" + address + "}";
    }
}
