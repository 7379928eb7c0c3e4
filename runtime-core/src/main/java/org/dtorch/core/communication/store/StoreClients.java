package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.function.Function;
import org.bytedeco.pytorch.Store;

/**
 * The process's pooled c10d {@code TCPStore} clients, by server address, for code outside this package (Network
 * promises): a call borrows an idle client or connects a new one, and gives it back unless the call threw. Each new
 * connection costs c10d a reverse lookup of the address, which on some networks waits seconds for a DNS answer
 * (c10d asks for a log line, before connecting); pooled clients pay it once.
 *
 * <p>Thread-safe: each call has its client to itself.
 */
public final class StoreClients {

    private StoreClients() {
    }

    /**
     * Runs {@code call} on a client of the server at {@code host:port}; {@code timeout} bounds the connection and each
     * c10d call; {@code who} names the caller in errors.
     *
     * @throws org.dtorch.core.communication.CommException if no client could connect in time
     */
    public static <T> T call(String host, int port, Duration timeout, String who, Function<Store, T> call) {
        return NetworkStoreClients.withClient(new RendezvousAddress(host, port), timeout, who, call);
    }

    /** Closes the idle clients of the server at {@code host:port}, which stopped. */
    public static void forget(String host, int port) {
        NetworkStoreClients.forget(new RendezvousAddress(host, port));
    }
}
