package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.List;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * Small text values of a run kept in its rendezvous (the c10d {@code TCPStore} of a {@link RendezvousServer}): what the
 * nodes of a run across hosts publish to find each other. A client of a server that is not up yet keeps trying until its
 * deadline, so nodes may start in any order.
 *
 * <p>Thread-safe: calls go through a pool of c10d clients.
 */
public final class RendezvousClient implements AutoCloseable {
    private static final long RETRY_MILLIS = 200;

    private final NetworkStoreClients clients;

    private RendezvousClient(NetworkStoreClients clients) {
        this.clients = clients;
    }

    /**
     * Connects to {@code address}, retrying until {@code deadline} while nothing listens there; {@code who} names the
     * caller in errors.
     *
     * @throws CommTimeoutException naming the address if no server answered by the deadline
     */
    public static RendezvousClient connect(RendezvousAddress address, Deadline deadline, String who) {
        CommException last = null;
        while (true) {
            try {
                Duration left = Duration.ofNanos(Math.max(1_000_000, deadline.remainingNanos()));
                return new RendezvousClient(NetworkStoreClients.connect(address, left, who));
            } catch (CommException e) {
                last = e;
            }
            if (deadline.expired()) {
                throw new CommTimeoutException(who + ": no rendezvous server answered at " + address + " " + deadline.timedOutAfter()
                    + " (last: " + last.getMessage() + ")", last);
            }
            try {
                Thread.sleep(Math.min(RETRY_MILLIS, Math.max(1, deadline.remainingNanos() / 1_000_000)));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException(who + ": interrupted while reaching the rendezvous " + address);
            }
        }
    }

    /** Sets {@code key} to {@code value}. */
    public void set(String key, String value) {
        clients.call("set " + key, c -> {
            c.set(key, value);
            return null;
        });
    }

    /**
     * The value of {@code key} once it exists, waiting until {@code deadline}; {@code waitingFor} says, in the timeout's
     * message, what the key stands for.
     *
     * @throws CommTimeoutException naming the key, the address and {@code waitingFor} at the deadline
     */
    public String await(String key, Deadline deadline, String waitingFor) {
        NetworkStoreClients.Outcome outcome = clients.await("wait for " + key, List.of(key), deadline);
        return switch (outcome) {
            case ARRIVED -> clients.call("get " + key, c -> c.get_to_str(key));
            case TIMED_OUT -> throw new CommTimeoutException("waiting for " + waitingFor + " (key '" + key + "' of the rendezvous "
                + clients.address() + ") " + deadline.timedOutAfter());
            case INTERRUPTED -> throw new CommException("interrupted while waiting for " + waitingFor + " (key '" + key + "')");
            case CLOSED -> throw new CommException("the rendezvous client closed while waiting for " + waitingFor);
        };
    }

    /** Adds {@code delta} to the counter {@code key} (created at 0) and returns the new value. */
    public long add(String key, long delta) {
        return clients.call("add " + key, c -> c.add(key, delta));
    }

    /** Where the server is. */
    public RendezvousAddress address() {
        return clients.address();
    }

    @Override
    public void close() {
        clients.close();
    }
}
