package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.function.Function;
import org.bytedeco.pytorch.PrefixStore;
import org.bytedeco.pytorch.Store;

/**
 * The c10d store of one c10d process group (Gloo or NCCL) whose ranks meet at a {@link RendezvousAddress}: a
 * {@code PrefixStore} over a {@code TCPStore} client borrowed from this process's pooled clients of that address, so
 * that creating a group opens no new connection once the pool is warm (a new one may cost c10d's reverse DNS look-up,
 * seconds where the resolver drops the query). The group's keys live under the prefix, which must be unique to the
 * group.
 *
 * <p>Ownership: the presets' {@code intrusive_ptr} adapter lets a c10d constructor adopt a store Java made outright (it
 * frees it with the last c10d reference, whatever Java still holds), while a store that came from c10d as an
 * {@code intrusive_ptr}, as the pooled client does, is only shared by count. So {@link #handOver} makes the
 * {@code PrefixStore}, hands it to the group's constructor and gives up Java's own deallocation of it: the group frees
 * it when it is destroyed, and keeps the client alive until then. The client goes back to the pool at {@link #close()},
 * which the holder calls once the group no longer calls its store: after the group was destroyed, or, for a Gloo group,
 * once it connected (Gloo uses its store only to connect, unless {@code TORCH_GLOO_LAZY_INIT} is set). The pool may
 * then lend the client to another group while the first still references it.
 *
 * <p>Not thread-safe: one thread creates the group, then whoever destroys it closes this.
 */
public final class RendezvousGroupStore implements AutoCloseable {
    private final NetworkStoreClients clients;
    private final Store client;
    private final String prefix;
    private boolean handedOver;
    private boolean healthy = true;
    private boolean closed;

    private RendezvousGroupStore(NetworkStoreClients clients, Store client, String prefix) {
        this.clients = clients;
        this.client = client;
        this.prefix = prefix;
    }

    /**
     * Borrows a client of {@code address} (connecting one within {@code timeout} when none is idle: the server may start
     * later than this rank); the group's store calls are bounded by {@code timeout}. {@code who} names the rank and
     * group in errors.
     *
     * @throws IllegalArgumentException if {@code prefix} is blank
     * @throws org.dtorch.core.communication.CommTimeoutException if the rendezvous did not answer within the timeout
     * @throws org.dtorch.core.communication.CommException        if it answered with an error
     */
    public static RendezvousGroupStore connect(RendezvousAddress address, String prefix, Duration timeout, String who) {
        java.util.Objects.requireNonNull(address, "address");
        checkPrefix(prefix, who);
        return borrow(NetworkStoreClients.connect(address, timeout, who), prefix, timeout, who);
    }

    /** As {@link #connect}, with a client of {@code clients}, the pool of a Network store. */
    static RendezvousGroupStore borrow(NetworkStoreClients clients, String prefix, Duration timeout, String who) {
        checkPrefix(prefix, who);
        return new RendezvousGroupStore(clients, clients.borrowFor(who, timeout), prefix);
    }

    private static void checkPrefix(String prefix, String who) {
        if (prefix == null || prefix.isBlank()) {
            throw new IllegalArgumentException(who + ": the group's store prefix must be non-blank, got "
                + (prefix == null ? "null" : "'" + prefix + "'"));
        }
    }

    /**
     * Calls {@code constructor} (a c10d group constructor taking the store) with a new {@code PrefixStore} over the
     * client, which the group adopts: pass the argument to the constructor directly and keep no other reference. Once
     * only. When the constructor fails, the client is closed at {@link #close()} rather than pooled.
     *
     * @throws IllegalStateException if called twice, or after {@link #close()}
     */
    public <T> T handOver(Function<Store, T> constructor) {
        if (handedOver || closed) {
            throw new IllegalStateException("the store of prefix '" + prefix + "' was " + (closed ? "closed" : "handed over already"));
        }
        handedOver = true;
        PrefixStore prefixed = new PrefixStore(prefix, client);
        boolean built = false;
        try {
            T group = constructor.apply(prefixed);
            built = true;
            return group;
        } finally {
            healthy = built;
            prefixed.deallocate(false); // the constructor adopted it (or, failing, freed it)
        }
    }

    /**
     * Gives the client back to the pool (closes it if the group's construction failed); the group keeps its reference.
     * Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        clients.giveBack(client, healthy);
    }
}
