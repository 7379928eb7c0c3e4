package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.NetworkStoreLayout.*;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.bytedeco.pytorch.StringVector;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * Who the participants of one {@link NetworkTensorStore} are, and their meetings: joining (the world size checked, the
 * rank's slot claimed, the lifetime agreed, every rank's host and Gloo address exchanged), the barrier, and leaving.
 * The keys are {@link NetworkStoreLayout}'s.
 *
 * <p>The lifetime: a store key may be created again after every participant closed it, and its old keys must not
 * be read as new ones. Each rank counts its own creations of the key ({@code r<r>/opens}); since a rank's slot admits
 * one instance at a time and the creation ends with a barrier, every rank's count is the same for one lifetime, so
 * the ranks agree on a fresh namespace without talking. A creation that fails withdraws its count, its slot and its
 * host.
 *
 * <p>Thread-safe: barriers of one participant are serialized; the rest is immutable after joining.
 */
final class NetworkStoreMembership {
    private final NetworkStoreClients clients;
    private final String store;
    private final String lifetime;
    private final int rank;
    private final int world;
    private final String token;
    private final String[] hostIds;
    private final String[] glooAddresses;
    private final ReentrantLock barrierLock = new ReentrantLock();
    /** The number of the next barrier; a barrier given up is not counted, so its retry has its number. Guarded by barrierLock. */
    private long nextBarrier;
    private static final AtomicLong TOKENS = new AtomicLong();

    private NetworkStoreMembership(NetworkStoreClients clients, String store, String lifetime, int rank, int world, String token,
                                   String[] hostIds, String[] glooAddresses) {
        this.clients = clients;
        this.store = store;
        this.lifetime = lifetime;
        this.rank = rank;
        this.world = world;
        this.token = token;
        this.hostIds = hostIds;
        this.glooAddresses = glooAddresses;
    }

    /**
     * Joins the store of {@code info} at the rendezvous of {@code clients}, as rank {@code info.rank()} on host
     * {@code info.hostId()} with Gloo on {@code glooAddress}; returns once every rank joined.
     *
     * @throws IllegalArgumentException if the store exists with another world size
     * @throws IllegalStateException    if this rank is open already
     * @throws CommTimeoutException     if some rank did not join by {@code deadline}, naming them
     */
    static NetworkStoreMembership join(NetworkStoreClients clients, TensorStoreCreateInfo info, String glooAddress, Deadline deadline,
                                       String who) {
        String store = store(info.storeKey());
        int rank = info.rank();
        int world = info.worldSize();
        String op = who + " joining";
        String worldValue = Integer.toString(world);
        String existing = clients.call(op, c -> c.compareSet(world(store), "", worldValue));
        if (!existing.equals(worldValue)) {
            throw new IllegalArgumentException("store '" + info.storeKey() + "' exists at the rendezvous " + clients.address()
                + " with worldSize " + existing + "; rank " + rank + " on host '" + info.hostId() + "' asked for worldSize " + world);
        }
        String token = info.hostId() + "\t" + HostIdentity.process() + "\t" + TOKENS.incrementAndGet();
        String holder = clients.call(op, c -> c.compareSet(slot(store, rank), "", token));
        if (!holder.equals(token)) {
            String[] h = holder.split("\t");
            throw new IllegalStateException("store '" + info.storeKey() + "': rank " + rank + " is already open (on host '" + h[0]
                + "', process " + (h.length > 1 ? h[1] : "?") + "); a second participant of the same rank is refused");
        }
        clients.call(op, c -> c.add(open(store), 1));
        long created = clients.call(op, c -> c.add(opens(store, rank), 1));
        String lifetime = NetworkStoreLayout.lifetime(store, created - 1);
        NetworkStoreMembership joined = null;
        try {
            clients.call(op, c -> {
                c.set(host(lifetime, rank), info.hostId() + "\t" + glooAddress + "\t" + ProcessHandle.current().pid());
                return null;
            });
            List<String> hostKeys = new ArrayList<>(world);
            for (int r = 0; r < world; r++) {
                hostKeys.add(host(lifetime, r));
            }
            awaitRanks(clients, op, hostKeys, deadline, info);
            List<String> values = clients.call(op, c -> {
                List<String> read = new ArrayList<>(world);
                for (String k : hostKeys) {
                    read.add(c.get_to_str(k));
                }
                return read;
            });
            String[] hostIds = new String[world];
            String[] glooAddresses = new String[world];
            for (int r = 0; r < world; r++) {
                String[] f = values.get(r).split("\t");
                hostIds[r] = f[0];
                glooAddresses[r] = f.length > 1 ? f[1] : "?";
            }
            joined = new NetworkStoreMembership(clients, store, lifetime, rank, world, token, hostIds, glooAddresses);
            return joined;
        } finally {
            if (joined == null) {
                withdraw(clients, store, lifetime, rank, token);
            }
        }
    }

    /** Waits for every rank's host key, naming the ranks missing at the deadline. */
    private static void awaitRanks(NetworkStoreClients clients, String op, List<String> hostKeys, Deadline deadline,
                                   TensorStoreCreateInfo info) {
        NetworkStoreClients.Outcome outcome = clients.await(op, hostKeys, deadline);
        if (outcome == NetworkStoreClients.Outcome.ARRIVED) {
            return;
        }
        if (outcome == NetworkStoreClients.Outcome.CLOSED) {
            throw new IllegalStateException(op + ": the store is closed");
        }
        List<Integer> missing = new ArrayList<>();
        for (int r = 0; r < hostKeys.size(); r++) {
            String key = hostKeys.get(r);
            boolean there = clients.call(op, c -> {
                try (StringVector one = new StringVector(key)) {
                    return c.check(one);
                }
            });
            if (!there) {
                missing.add(r);
            }
        }
        String seen = (hostKeys.size() - missing.size()) + " of " + hostKeys.size() + " ranks arrived; missing: ranks " + missing
            + " (rendezvous " + clients.address() + ")";
        if (outcome == NetworkStoreClients.Outcome.INTERRUPTED) {
            throw new CommInterruptedException("creating store '" + info.storeKey() + "' (rank " + info.rank() + " on host '" + info.hostId()
                + "') was interrupted: " + seen, new InterruptedException());
        }
        throw new CommTimeoutException("creating store '" + info.storeKey() + "' (rank " + info.rank() + " on host '" + info.hostId() + "') "
            + deadline.timedOutAfter() + " waiting for the other participants: " + seen);
    }

    /** Undoes a join that failed: its lifetime count, its host key, its slot and its share of the open count. */
    private static void withdraw(NetworkStoreClients clients, String store, String lifetime, int rank, String token) {
        try {
            clients.call("withdrawing", c -> {
                c.add(opens(store, rank), -1);
                c.deleteKey(host(lifetime, rank));
                release(c, store, rank, token);
                return null;
            });
        } catch (RuntimeException e) {
            // the rendezvous is gone: nothing to undo there
        }
    }

    private static void release(org.bytedeco.pytorch.Store c, String store, int rank, String token) {
        if (token.equals(c.compareSet(slot(store, rank), token, token))) {
            c.deleteKey(slot(store, rank));
        }
        if (c.add(open(store), -1) <= 0) {
            c.deleteKey(world(store));
        }
    }

    /** The namespace of this lifetime of the store. */
    String lifetime() {
        return lifetime;
    }

    /** The host identity of {@code rank}. */
    String hostOf(int r) {
        return hostIds[r];
    }

    /** Where {@code rank}'s Gloo listens. */
    String glooAddressOf(int r) {
        return glooAddresses[r];
    }

    /**
     * Blocks until every participant arrived at this barrier. A participant that stops waiting (deadline, interrupt,
     * close) withdraws its arrival unless the barrier completed meanwhile, and its next barrier is this one again.
     * {@code who} begins the messages ({@code barrier() on store 'S' (rank r on host 'h')}).
     */
    void barrier(Deadline deadline, String who) {
        try {
            if (!barrierLock.tryLock(Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS)) {
                throw new CommTimeoutException(who + " " + deadline.timedOutAfter() + ": another barrier of this rank is still waiting");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommInterruptedException(who + " was interrupted before it arrived", e);
        }
        try {
            long n = nextBarrier;
            String counter = NetworkStoreLayout.barrier(lifetime, n);
            String done = barrierDone(lifetime, n);
            long arrived = clients.call(who, c -> c.add(counter, 1));
            if (arrived >= world) {
                clients.call(who, c -> {
                    c.set(done, "1");
                    if (n > 0) {
                        // Everyone who arrived here passed barrier n - 1: nobody reads its keys any more.
                        c.deleteKey(NetworkStoreLayout.barrier(lifetime, n - 1));
                        c.deleteKey(barrierDone(lifetime, n - 1));
                    }
                    return null;
                });
                nextBarrier = n + 1;
                return;
            }
            NetworkStoreClients.Outcome outcome = clients.await(who, List.of(done), deadline);
            if (outcome == NetworkStoreClients.Outcome.ARRIVED) {
                nextBarrier = n + 1;
                return;
            }
            // Withdraw, unless the last rank arrived meanwhile: then this rank passed.
            long left = clients.call(who, c -> c.add(counter, -1));
            boolean passed = clients.call(who, c -> {
                try (StringVector one = new StringVector(done)) {
                    return c.check(one);
                }
            });
            if (passed) {
                nextBarrier = n + 1;
                return;
            }
            String seen = (left + 1) + " of " + world + " ranks arrived";
            switch (outcome) {
                case TIMED_OUT -> throw new CommTimeoutException(who + " " + deadline.timedOutAfter() + ": " + seen);
                case INTERRUPTED -> throw new CommInterruptedException(who + " was interrupted: " + seen, new InterruptedException());
                default -> throw new IllegalStateException(who + ": the store is closed (" + seen + ")");
            }
        } finally {
            barrierLock.unlock();
        }
    }

    /** Leaves the store: frees this rank's host key, its request queue and its slot. */
    void leave() {
        try {
            clients.call("leaving", c -> {
                c.deleteKey(host(lifetime, rank));
                c.deleteKey(requests(lifetime, rank));
                release(c, store, rank, token);
                return null;
            });
        } catch (RuntimeException e) {
            // the rendezvous is gone: nothing to free there
        }
    }
}
