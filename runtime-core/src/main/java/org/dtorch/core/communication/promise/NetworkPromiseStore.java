package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.bytedeco.pytorch.IntOptional;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.store.StoreClients;

/**
 * Where Network promises keep their outcomes: a c10d {@code TCPStore} at {@code host:port}. Either this
 * process hosts the server ({@link #host}; the promise's creator, when no shared store is given) or it names a store
 * that someone else serves ({@link #shared}; the runtime-wide store of a multi-node run). Each blocking call has a
 * client to itself for its duration ({@link #call}), taken from the process's pool, so a waiter blocked in the store
 * never holds up another call and a new connection's reverse lookup is paid once per client, not per call.
 *
 * <p>A hosted server is reference-counted: the promise and its future each hold one reference, released once
 * ({@link #share}, {@link #release}); the last release closes the server's socket.
 *
 * <p>Thread-safe: the address is immutable; the reference count is atomic.
 */
final class NetworkPromiseStore {
    private final String host;
    private final int port;
    /** The server this process hosts, or null for a shared store. */
    private final TCPStore server;
    private final AtomicInteger references = new AtomicInteger(1);

    private NetworkPromiseStore(String host, int port, TCPStore server) {
        this.host = host;
        this.port = port;
        this.server = server;
    }

    /**
     * Starts a {@code TCPStore} server in this process on a free port of {@code advertisedHost}'s address, and on no
     * other ({@link StoreListenSocket}); {@code advertisedHost} is also the name that other hosts reach it by, as
     * {@code serialize()} writes it.
     */
    static NetworkPromiseStore host(String advertisedHost) {
        checkHost(advertisedHost);
        StoreListenSocket.Bound socket = StoreListenSocket.listen(advertisedHost);
        try (TCPStoreOptions options = new TCPStoreOptions(); IntOptional fd = new IntOptional(socket.fd())) {
            options.port((short) socket.port()).isServer(true).waitWorkers(false).masterListenFd(fd);
            return new NetworkPromiseStore(advertisedHost, socket.port(), new TCPStore(advertisedHost, options));
        } catch (RuntimeException e) {
            StoreListenSocket.close(socket.fd());
            throw new CommException("starting a TCPStore server for Network promises on " + advertisedHost + ":" + socket.port()
                + " failed: " + e.getMessage(), e);
        }
    }

    /** A store served elsewhere, at {@code host:port}; nothing is connected until a call needs it. */
    static NetworkPromiseStore shared(String host, int port) {
        checkHost(host);
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("a TCPStore port is 1 to 65535, got " + port + " (host " + host + ")");
        }
        return new NetworkPromiseStore(host, port, null);
    }

    private static void checkHost(String host) {
        if (Objects.requireNonNull(host, "host").isBlank() || host.contains("/")) {
            throw new IllegalArgumentException("a TCPStore host is a name or an address without '/', got '" + host + "'");
        }
    }

    String host() {
        return host;
    }

    int port() {
        return port;
    }

    /**
     * Runs {@code call} on a pooled client of the store ({@link StoreClients}): connecting retries until {@code timeout},
     * which is also the deadline of each of its c10d calls.
     *
     * @throws CommException naming host and port if the store cannot be reached in time
     */
    <T> T call(Duration timeout, Function<Store, T> call) {
        return StoreClients.call(host, port, Duration.ofMillis(Math.max(1, timeout.toMillis())), "a Network promise at " + this, call);
    }

    /** One more holder of a hosted server; returns this. */
    NetworkPromiseStore share() {
        references.incrementAndGet();
        return this;
    }

    /** Drops one holder; the last closes a hosted server. Each holder calls it once. */
    void release() {
        if (references.decrementAndGet() == 0 && server != null) {
            StoreClients.forget(host, port);
            server.close();
        }
    }

    @Override
    public String toString() {
        return host + ":" + port;
    }
}
