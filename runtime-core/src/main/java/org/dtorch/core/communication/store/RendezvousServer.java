package org.dtorch.core.communication.store;

import java.time.Duration;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommOptions;

/**
 * A c10d {@code TCPStore} server in this process: the {@link RendezvousAddress} that {@link NetworkTensorStore}s
 * meet at. One serves any number of stores (each keeps its keys under its store key), so a run needs one, started
 * by whoever starts the run (the multi-node runtime's node 0; a test), before the stores are created, and closed
 * after the last of them.
 *
 * <p>c10d's server listens on every interface of the host (it has no bind address) and, like every c10d store,
 * authenticates nobody: anyone who reaches the port can read and write its keys. The network between the hosts
 * must be trusted, or the port closed to others by a firewall (docs/communication-core.md, "NetworkTensorStore").
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
     * Starts a server on {@code port} (0: a free port the system picks; {@link #address()} says which), advertised as
     * {@code host}: the name or address by which the participants reach this host.
     *
     * @throws CommException if the port cannot be bound
     */
    public static RendezvousServer start(String host, int port) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("rendezvous port must be in [0, 65535] (0: any free port), got " + port);
        }
        new RendezvousAddress(host, Math.max(port, 1)); // validates the host
        Duration timeout = CommOptions.global().timeout();
        try (TCPStoreOptions options = new TCPStoreOptions(); Milliseconds millis = new Milliseconds(timeout.toMillis())) {
            options.port((short) port);
            options.isServer(true);
            options.waitWorkers(false);
            options.timeout(millis);
            TCPStore server;
            try {
                server = new TCPStore(host, options);
            } catch (RuntimeException e) {
                throw new CommException("cannot start the rendezvous server on port " + port + " (advertised as " + host + "): "
                    + NetworkStoreClients.c10dMessage(e), e);
            }
            return new RendezvousServer(server, new RendezvousAddress(host, Short.toUnsignedInt(server.getPort())));
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
