package org.dtorch.core.communication.store;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.group.GlooLog;

/**
 * The bytes of a {@link NetworkTensorStore}: a c10d {@code ProcessGroupGloo} of the store's participants, made over the
 * store's rendezvous through a {@code PrefixStore}, moving each value by one point-to-point send and receive.
 *
 * <p>Each participant's Gloo listens on {@value #HOSTNAME_PROPERTY} when set, else on the address by which this host
 * reaches the rendezvous (so loopback stays loopback, and a multi-homed host uses the interface that the run's network
 * uses). Devices are kept per address and rank for the life of the JVM, one TCP event loop each, as the collectives'
 * are kept per device: ranks of one JVM then move their bytes on loops of their own, as on two hosts.
 *
 * <p>A send or receive holds its tensor until it completes. One that did not complete (its wait failed or timed out,
 * or the store closed first) is kept, with its tensor, until the group is destroyed, since Gloo may still write into
 * or read from that memory; Gloo tears the connection to that peer down when a wait times out, so later transfers
 * with it fail at once, naming it.
 *
 * <p>Thread-safe: any thread may send, receive and wait; {@link #close()} once, after every call returned.
 */
final class NetworkStoreGloo implements AutoCloseable {
    /**
     * System property: the host name or address the Network stores' Gloo groups listen on; default: see the class. The
     * collectives' own property (their default, loopback, differs), so that one setting names the host's private
     * interface for every Gloo group (docs/multi-host.md, "Security").
     */
    static final String HOSTNAME_PROPERTY = "dtorch.gloo.hostname";
    private static final ConcurrentHashMap<String, org.bytedeco.pytorch.gloo.Device> DEVICES = new ConcurrentHashMap<>();

    private final ProcessGroupGloo group;
    private final RendezvousGroupStore store;
    private final String address;
    private final Set<Work> inFlight = ConcurrentHashMap.newKeySet();
    private final List<Work> lingering = new ArrayList<>();
    private volatile boolean aborted;

    private NetworkStoreGloo(ProcessGroupGloo group, RendezvousGroupStore store, String address) {
        this.group = group;
        this.store = store;
        this.address = address;
    }

    /** Where this process's Network stores listen for Gloo when they meet at {@code rendezvous}. */
    static String listenAddress(RendezvousAddress rendezvous) {
        String property = System.getProperty(HOSTNAME_PROPERTY);
        if (property != null && !property.isBlank()) {
            return property.strip();
        }
        try (DatagramSocket probe = new DatagramSocket()) {
            // A connected UDP socket sends nothing; it only asks the kernel which local address routes there.
            probe.connect(InetAddress.getByName(rendezvous.host()), rendezvous.port());
            InetAddress local = probe.getLocalAddress();
            if (local != null && !local.isAnyLocalAddress()) {
                return local.getHostAddress();
            }
        } catch (IOException | RuntimeException e) {
            // fall through: the host's own name
        }
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (IOException e) {
            return "127.0.0.1";
        }
    }

    /**
     * Connects the group of {@code world} ranks over a client of {@code clients} (keys under {@code prefix}), which the
     * group shares until {@link #close()}; blocks until every rank connected, at most {@code timeout}, the deadline also
     * of every later wait Gloo does by itself.
     *
     * <p>Ownership: as {@link RendezvousGroupStore} says; destroying the group frees its {@code PrefixStore}, and the
     * client goes back.
     */
    static NetworkStoreGloo connect(NetworkStoreClients clients, String prefix, int rank, int world, Duration timeout, String address,
                                    String who) {
        long start = System.nanoTime();
        RendezvousGroupStore store = RendezvousGroupStore.borrow(clients, prefix, timeout, who + " connecting Gloo");
        try (Milliseconds millis = new Milliseconds(Math.max(1, timeout.toMillis()));
             ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(millis)) {
            options.devices().push_back(DEVICES.computeIfAbsent(address + "#" + rank, unused -> ProcessGroupGloo.createDeviceForHostname(address)));
            options.threads(1);
            GlooLog.Muting quiet = GlooLog.muteWhileConnecting();
            try {
                return new NetworkStoreGloo(store.handOver(prefixed -> new ProcessGroupGloo(prefixed, rank, world, options)), store,
                    address);
            } finally {
                quiet.close();
            }
        } catch (RuntimeException e) {
            store.close();
            String what = who + ": connecting the Gloo group of " + world + " ranks (listening on " + address + ")";
            if (System.nanoTime() - start >= timeout.toNanos()) {
                throw new CommTimeoutException(what + " " + Deadline.after(timeout).timedOutAfter() + ": "
                    + NetworkStoreClients.c10dMessage(e), e);
            }
            throw new CommException(what + " failed: " + NetworkStoreClients.c10dMessage(e), e);
        }
    }

    /** The address this participant's Gloo listens on. */
    String address() {
        return address;
    }

    /** Starts sending {@code tensor} (contiguous, on the CPU) to {@code peer}, matched by the receive tagged {@code tag}. */
    Work send(Tensor tensor, int peer, int tag) {
        try (TensorVector one = new TensorVector(tensor)) {
            return started(group.send(one, peer, tag));
        }
    }

    /** Starts receiving into {@code tensor} (contiguous, on the CPU) what {@code peer} sends tagged {@code tag}. */
    Work recv(Tensor tensor, int peer, int tag) {
        try (TensorVector one = new TensorVector(tensor)) {
            return started(group.recv(one, peer, tag));
        }
    }

    private Work started(Work work) {
        inFlight.add(work);
        if (aborted) {
            work.abort(); // abortAll() may have looked at the set before this work was in it
        }
        return work;
    }

    /**
     * Waits for {@code work} until {@code deadline}, then closes it. A wait that failed keeps the work, and its tensor,
     * until the group is destroyed; {@code what} begins the error's message.
     *
     * @throws CommTimeoutException if the deadline passed first
     * @throws CommException        if Gloo failed (the peer closed its connection, or {@link #abortAll()})
     */
    void await(Work work, Deadline deadline, String what) {
        long millis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos()));
        long start = System.nanoTime();
        boolean completed;
        try (Milliseconds timeout = new Milliseconds(millis)) {
            completed = work._wait(timeout);
        } catch (RuntimeException e) {
            linger(work);
            if (System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(millis)) {
                throw new CommTimeoutException(what + " " + deadline.timedOutAfter() + " (gloo: " + NetworkStoreClients.c10dMessage(e) + ")", e);
            }
            throw new CommException(what + " failed (gloo: " + NetworkStoreClients.c10dMessage(e) + ")", e);
        }
        if (!completed) {
            linger(work); // aborted: Gloo returns false rather than throwing
            throw new CommException(what + " failed: the transfer was aborted (the store is closing)");
        }
        inFlight.remove(work);
        work.close();
    }

    /** Keeps {@code work} (not complete, or not known to be) until the group is destroyed. */
    void linger(Work work) {
        inFlight.remove(work);
        synchronized (lingering) {
            lingering.add(work);
        }
    }

    /** Wakes every thread waiting for a transfer, with an error, and aborts the transfers started later (the store is closing). */
    void abortAll() {
        aborted = true;
        for (Work work : inFlight) {
            try {
                work.abort();
            } catch (RuntimeException e) {
                // already complete or failed
            }
        }
    }

    /** Destroys the group, then frees what was kept of unfinished transfers and gives its client back. */
    @Override
    public void close() {
        group.close();
        store.close();
        synchronized (lingering) {
            lingering.forEach(Work::close);
            lingering.clear();
        }
    }
}
