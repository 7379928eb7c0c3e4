package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.PrefixStore;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.StringVector;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * One participant's connections to the {@link RendezvousAddress}: c10d {@code TCPStore} clients, and the waits on its
 * keys.
 *
 * <p>A c10d client does one call at a time (a blocking {@code wait} holds it), and any thread of a participant may
 * call its store, so each call borrows a client and gives it back. The idle clients are shared by every store of this
 * process that meets at the same address (at most {@value #MAX_IDLE_PER_ADDRESS} kept): stores are created often, and
 * a new c10d connection costs more than its round trip, since c10d looks the peer's address up in DNS on both ends for
 * its log lines (on a host whose resolver drops a query, five seconds). A client whose call failed is dropped.
 *
 * <p>A wait runs on a helper thread while its caller waits for it in Java: so the caller's deadline, an interrupt and
 * {@link #wakeWaiters()} end the caller's wait at once, whatever the native call is doing. The native wait is given
 * the caller's deadline and a second more, so that it ends by itself; a waiter that gave up on a key its own ticket
 * can set (a consumer abandoning a ticket) sets it, which ends the native wait at once.
 *
 * <p>Thread-safe: any thread may call any method.
 */
final class NetworkStoreClients implements AutoCloseable {
    /** How many idle clients of one address this process keeps. */
    static final int MAX_IDLE_PER_ADDRESS = 64;
    /** How long a native wait outlives its caller's deadline, so that the caller's clock decides. */
    private static final long NATIVE_GRACE_MILLIS = 1_000;
    /** The native waits of every store of this process; idle threads end after a minute. */
    private static final ExecutorService WAITERS =
        Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("dtorch-network-store-wait-", 0).factory());
    /** The idle clients of this process, by the address they reach. */
    private static final ConcurrentHashMap<RendezvousAddress, ConcurrentLinkedDeque<Store>> IDLE = new ConcurrentHashMap<>();
    private static final CommException CLOSED = new CommException("the store is closed");

    /** How a wait ended, when it did not fail. */
    enum Outcome { ARRIVED, TIMED_OUT, INTERRUPTED, CLOSED }

    private final RendezvousAddress address;
    private final Duration timeout;
    private final String who;
    private final ConcurrentLinkedDeque<Store> idle;
    private final Set<CompletableFuture<Void>> waiting = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;
    /** Set by wakeWaiters(): waits end at once. */
    private volatile boolean waking;

    private NetworkStoreClients(RendezvousAddress address, Duration timeout, String who) {
        this.address = address;
        this.timeout = timeout;
        this.who = who;
        this.idle = IDLE.computeIfAbsent(address, a -> new ConcurrentLinkedDeque<>());
    }

    /**
     * The connections of the participant {@code who} to {@code address}, with one client connected already (trying
     * until {@code timeout} passes: the server may start later than this participant); the calls' deadline is
     * {@code timeout}.
     *
     * @throws CommTimeoutException if the server did not answer within the timeout
     * @throws CommException        if it answered with an error
     */
    static NetworkStoreClients connect(RendezvousAddress address, Duration timeout, String who) {
        NetworkStoreClients clients = new NetworkStoreClients(address, timeout, who);
        clients.giveBack(clients.borrow("connecting"), true);
        return clients;
    }

    /**
     * Runs {@code call} on an idle client of {@code address}, or a new one (connected within {@code timeout}), its calls
     * bounded by {@code timeout}; the client goes back to the idle ones unless the call threw (its connection may be
     * mid-request). New c10d connections cost a reverse DNS lookup of the address each, which a resolver that drops the
     * query stretches to seconds: reuse saves it.
     */
    static <T> T withClient(RendezvousAddress address, Duration timeout, String who, Function<Store, T> call) {
        NetworkStoreClients clients = new NetworkStoreClients(address, timeout, who);
        Store client = clients.borrow(who);
        boolean healthy = false;
        try {
            T result = call.apply(client);
            healthy = true;
            return result;
        } finally {
            clients.giveBack(client, healthy);
        }
    }

    /** Closes the idle clients of {@code address} (its server stopped). */
    static void forget(RendezvousAddress address) {
        ConcurrentLinkedDeque<Store> clients = IDLE.remove(address);
        if (clients != null) {
            for (Store client; (client = clients.poll()) != null; ) {
                client.close();
            }
        }
    }

    /**
     * One new client of {@code address}, connected within {@code timeout}, owned by the caller through a c10d
     * {@code intrusive_ptr} of its own ({@link #adopted}), so that it may be lent to a c10d constructor and used again.
     */
    private static Store newClient(RendezvousAddress address, Duration timeout, String who) {
        long start = System.nanoTime();
        TCPStore raw;
        try (TCPStoreOptions options = new TCPStoreOptions(); Milliseconds millis = new Milliseconds(timeout.toMillis())) {
            options.port((short) address.port());
            options.isServer(false);
            options.waitWorkers(false);
            options.timeout(millis);
            raw = new TCPStore(address.host(), options);
        } catch (RuntimeException e) {
            String what = who + ": cannot reach the rendezvous " + address;
            if (System.nanoTime() - start >= timeout.toNanos()) {
                throw new CommTimeoutException(what + ": " + Deadline.after(timeout).timedOutAfter() + " (" + c10dMessage(e) + ")", e);
            }
            throw new CommException(what + ": " + c10dMessage(e), e);
        }
        return adopted(raw);
    }

    /**
     * {@code raw}, a store Java made, as a Java object holding a c10d {@code intrusive_ptr} to it. The presets' adapter
     * lets a c10d constructor that takes an {@code intrusive_ptr} adopt a Java-made object outright (it frees it with
     * the last c10d reference, whatever Java still holds), while an object that came from c10d as an
     * {@code intrusive_ptr} is shared by reference count. A {@code PrefixStore} adopts {@code raw}, hands it back as such
     * a pointer, and goes; no second connection is made.
     */
    private static Store adopted(TCPStore raw) {
        PrefixStore holder;
        try {
            holder = new PrefixStore("", raw);
        } finally {
            raw.deallocate(false); // the holder adopted it (or, failing, freed it)
        }
        try {
            return holder.getUnderlyingStore();
        } finally {
            holder.close();
        }
    }

    /** The address this pool's clients reach. */
    RendezvousAddress address() {
        return address;
    }

    /**
     * Runs {@code call} on a client of the pool; {@code op} names it in errors.
     *
     * @throws IllegalStateException if the pool is closed
     * @throws CommException         if the call failed on the client (its connection is dropped)
     */
    <T> T call(String op, Function<Store, T> call) {
        Store client = borrow(op);
        boolean healthy = false;
        try {
            T result = call.apply(client);
            healthy = true;
            return result;
        } catch (CommException | IllegalStateException | IllegalArgumentException e) {
            healthy = true; // raised by our code, not by the connection
            throw e;
        } catch (RuntimeException e) {
            throw new CommException(op + ": the rendezvous " + address + " failed: " + c10dMessage(e), e);
        } finally {
            giveBack(client, healthy);
        }
    }

    /**
     * Waits until every key of {@code keys} exists, at most until {@code deadline}. The outcome says whether they
     * arrived, or why the caller stopped waiting; an interrupted caller's flag is set again.
     *
     * @throws CommException if the rendezvous failed (its server is gone, say)
     */
    Outcome await(String op, List<String> keys, Deadline deadline) {
        CompletableFuture<Void> arrived = new CompletableFuture<>();
        waiting.add(arrived);
        try {
            if (waking) {
                return Outcome.CLOSED;
            }
            long nativeMillis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.remainingNanos())) + NATIVE_GRACE_MILLIS;
            WAITERS.execute(() -> waitNatively(op, keys, nativeMillis, arrived));
            arrived.get(Math.max(0, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
            return Outcome.ARRIVED;
        } catch (TimeoutException e) {
            return Outcome.TIMED_OUT;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Outcome.INTERRUPTED;
        } catch (ExecutionException e) {
            if (e.getCause() == CLOSED) {
                return Outcome.CLOSED;
            }
            if (deadline.expired()) {
                return Outcome.TIMED_OUT; // the native wait's own timeout, a hair after ours
            }
            throw e.getCause() instanceof CommException c ? c
                : new CommException(op + ": the rendezvous " + address + " failed: " + e.getCause().getMessage(), e.getCause());
        } finally {
            waiting.remove(arrived);
        }
    }

    private void waitNatively(String op, List<String> keys, long nativeMillis, CompletableFuture<Void> arrived) {
        Store client;
        try {
            client = borrow(op);
        } catch (RuntimeException e) {
            arrived.completeExceptionally(closed ? CLOSED : e);
            return;
        }
        boolean healthy = false;
        try (StringVector names = new StringVector(keys.toArray(String[]::new)); Milliseconds millis = new Milliseconds(nativeMillis)) {
            client._wait(names, millis);
            healthy = true;
            arrived.complete(null);
        } catch (RuntimeException e) {
            // A timed-out wait leaves the connection usable (c10d cancels it), but the caller gave up long ago.
            arrived.completeExceptionally(new CommException(op + ": the rendezvous " + address + " failed: " + c10dMessage(e), e));
        } finally {
            giveBack(client, healthy);
        }
    }

    /**
     * A client for one holder that keeps it a long time (a sender blocked on its queue, a Gloo group, which shares it by
     * reference count), its calls bounded by {@code callTimeout}; the holder gives it back with {@link #giveBack}.
     */
    Store borrowFor(String op, Duration callTimeout) {
        Store client = borrow(op);
        try (Milliseconds millis = new Milliseconds(callTimeout.toMillis())) {
            client.setTimeout(millis);
        }
        return client;
    }

    private Store borrow(String op) {
        if (closed) {
            throw new IllegalStateException(op + ": the store is closed");
        }
        Store client = idle.poll();
        if (client == null) {
            return newClient(address, timeout, who + ", " + op);
        }
        try (Milliseconds millis = new Milliseconds(timeout.toMillis())) {
            client.setTimeout(millis); // another store may have left its own
        }
        return client;
    }

    /** Returns a client to the process's idle clients, or closes it when its last call failed or enough are idle. */
    void giveBack(Store client, boolean healthy) {
        if (!healthy || idle.size() >= MAX_IDLE_PER_ADDRESS) {
            client.close();
            return;
        }
        idle.push(client);
    }

    /** Ends every caller's wait with {@link Outcome#CLOSED}, and every later one at once; calls still work. */
    void wakeWaiters() {
        waking = true;
        for (CompletableFuture<Void> f : waiting) {
            f.completeExceptionally(CLOSED);
        }
    }

    /** {@link #wakeWaiters()}, and refuses later calls; clients still in a call are given back when it returns. Idempotent. */
    @Override
    public void close() {
        wakeWaiters();
        closed = true;
    }

    /** The first line of a c10d error, without its {@code [file:line]} prefix. */
    static String c10dMessage(RuntimeException e) {
        String message = String.valueOf(e.getMessage());
        int firstLine = message.indexOf('\n');
        return (firstLine < 0 ? message : message.substring(0, firstLine)).replaceFirst("^\\[[^\\]]*\\]\\s*", "");
    }
}
