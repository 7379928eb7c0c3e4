package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.NetworkStoreLayout.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.bytedeco.pytorch.ByteVector;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.group.ResultBufferCache;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.Tracer;

/**
 * The {@link TensorStore} for participants on several hosts (docs/communication-core.md, "NetworkTensorStore"): the
 * four-step exchange of every store, with its bookkeeping in a c10d {@code TCPStore} at the {@link RendezvousAddress}
 * of the creation info ({@link NetworkStoreLayout} draws the keys) and the bytes moved by c10d Gloo, one
 * point-to-point send and receive per consumer, on a group of the store's participants ({@link NetworkStoreGloo}).
 *
 * <p>An exchange: {@code srcSet} claims the key ({@code live}), takes {@code getCount} ticket numbers from the key's
 * {@code published} counter and writes the value's description (producer, dtype, shape) into each of those tickets. A
 * consumer's {@code destGet} takes the next number from the key's {@code takes} counter and waits for that ticket (so
 * a consumer beyond a set's count waits for the next set, as in the other backends), reads it, asks the producer for
 * the bytes through the producer's request queue and receives them straight into the tensor it returns. Each
 * participant runs one sender thread that pops its queue and starts a Gloo send per request, from the producer's
 * tensor, without a copy. {@code destFinishGet} counts on the set's {@code fin} counter, and the consumer that brings
 * it to {@code getCount} sets {@code done}, which {@code srcWaitUntilGetFinished} waits for.
 *
 * <p>Every wait has the store's deadline. A consumer that stops waiting for its ticket (deadline, interrupt, close)
 * abandons it (compare-and-set), unless the producer filled it meanwhile, in which case it takes the value; a producer
 * skips abandoned tickets. So a failed {@code destGet} takes nothing, as in the other backends. Once a ticket is read
 * the transfer has a deadline of its own, the store's timeout again; a transfer that fails or times out counts as
 * taken (the producer's wait then fails at its deadline, naming the consumers that finished).
 *
 * <p>Values: CPU tensors of any dtype and shape (not contiguous: copied once by {@code srcSet}). A consumer gets a
 * new tensor of its own, not a view of the producer's, even on the producer's own rank. CUDA values, and consumers
 * that want CUDA, are refused before anything is sent (NCCL between hosts is not built yet), and so is
 * {@link #allocate}, which cannot share memory between hosts.
 *
 * <p>Thread-safe: any participant may call any method concurrently; one instance belongs to one rank.
 */
public final class NetworkTensorStore extends TensorStore {
    /**
     * System property: how many bytes of received values a participant keeps for reuse once their takers released
     * them, so that a repeated exchange does not fault in the pages of a fresh buffer while Gloo writes into it; default
     * {@value #DEFAULT_RECEIVE_CACHE_BYTES}, 0 keeps none.
     */
    public static final String RECEIVE_CACHE_PROPERTY = "dtorch.network.receiveCacheBytes";
    /** Default of {@value #RECEIVE_CACHE_PROPERTY}: room for two values of 256 MiB. */
    public static final long DEFAULT_RECEIVE_CACHE_BYTES = 512L << 20;
    private static final System.Logger LOG = System.getLogger(NetworkTensorStore.class.getName());

    private final String who;
    private final NetworkStoreClients clients;
    private final NetworkStoreMembership members;
    /** Null for a store of one participant: every take is local. */
    private final NetworkStoreGloo gloo;
    /** Null for a store of one participant. */
    private final NetworkStoreSender sender;
    /** The values this rank set and did not wait for yet, by key. */
    private final Map<String, NetworkStoreValue> produced = new ConcurrentHashMap<>();
    /** The takes of this rank not finished yet, by key, oldest first. */
    private final Map<String, Deque<Take>> taken = new ConcurrentHashMap<>();
    /** The tickets that destGet calls of this rank wait for, so that close() can abandon them. */
    private final Set<String> waitingTickets = ConcurrentHashMap.newKeySet();
    /** Keys this rank set in the current epoch; their counters are deleted at reset(). */
    private final Set<String> setThisEpoch = ConcurrentHashMap.newKeySet();
    /** Memory of received values, reused once their takers released them. Guarded by itself. */
    private final ResultBufferCache received = new ResultBufferCache(receiveCacheBytes());
    private final AtomicInteger tags = new AtomicInteger();
    private final AtomicLong liveTokens = new AtomicLong();
    /** Read: a call in flight; write: close() destroying what calls use. */
    private final ReentrantReadWriteLock calls = new ReentrantReadWriteLock();
    private volatile long epoch;
    private final StoreGuard guard;

    /** Joins the store at its rendezvous, connects its Gloo group and waits for the others (constructor barrier). */
    NetworkTensorStore(TensorStoreCreateInfo info) {
        super(info);
        RendezvousAddress rendezvous = Objects.requireNonNull(info.rendezvous(), "a Network store needs a rendezvous address");
        this.who = "store '" + info.storeKey() + "' (rank " + info.rank() + " on host '" + info.hostId() + "')";
        this.guard = new StoreGuard(who);
        Deadline deadline = Deadline.after(timeout());
        this.clients = NetworkStoreClients.connect(rendezvous, timeout(), who);
        NetworkStoreMembership joined = null;
        NetworkStoreGloo group = null;
        NetworkStoreSender serving = null;
        try {
            String glooAddress = NetworkStoreGloo.listenAddress(rendezvous);
            joined = NetworkStoreMembership.join(clients, info, glooAddress, deadline, who);
            if (info.worldSize() > 1) {
                Duration left = Duration.ofNanos(Math.max(1_000_000, deadline.remainingNanos()));
                group = NetworkStoreGloo.connect(clients, gloo(joined.lifetime()), info.rank(), info.worldSize(), left, glooAddress, who);
                serving = new NetworkStoreSender(clients, requests(joined.lifetime(), info.rank()), who, produced, group, info.rank());
            }
        } catch (RuntimeException e) {
            if (group != null) {
                group.close();
            }
            if (joined != null) {
                joined.leave();
            }
            clients.close();
            throw e;
        }
        this.members = joined;
        this.gloo = group;
        this.sender = serving;
        try {
            if (sender != null) {
                sender.start();
            }
            members.barrier(deadline, "creating " + who);
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    @Override
    public void srcSet(String key, Tensor value, DeviceStream stream, int getCount, DeviceKind destGetDeviceKind) {
        String op = guard.describe("srcSet", key);
        guard.checkKey(key, "srcSet");
        DeviceKind valueKind = checkSrcSet(op, value, stream, getCount);
        if (destGetDeviceKind == DeviceKind.CUDA) {
            Cuda.require(Device.cuda(0)); // a build without CUDA says so first, as the other backends do
        }
        if (valueKind == DeviceKind.CUDA || destGetDeviceKind == DeviceKind.CUDA) {
            throw new UnsupportedOperationException(op + ": a Network store moves CPU tensors (got " + TorchTensors.describe(value)
                + (destGetDeviceKind == DeviceKind.CUDA ? " for CUDA consumers" : "") + "); CUDA between hosts (NCCL) is not built yet");
        }
        if (value.is_sparse() || value.is_sparse_csr() || value.is_mkldnn() || value.is_quantized()) {
            throw new IllegalArgumentException(op + ": a Network store moves dense tensors, got " + TorchTensors.describe(value));
        }
        enter(op);
        try {
            NetworkStoreValue mine = produced.get(key);
            if (mine != null) {
                throw new IllegalStateException(op + ": the key is still live (" + mine.counts(finishedCount(op, mine))
                    + "); call srcWaitUntilGetFinished or reset() before setting it again");
            }
            long e = epoch;
            String k = tensorKey(members.lifetime(), e, key);
            String liveToken = rank() + " " + liveTokens.incrementAndGet();
            String holder = clients.call(op, c -> c.compareSet(live(k), "", liveToken));
            if (!holder.equals(liveToken)) {
                int other = Integer.parseInt(holder.substring(0, holder.indexOf(' ')));
                throw new IllegalStateException(op + ": the key is still live (set by rank " + other + " on host '" + members.hostOf(other)
                    + "', not waited for yet); call srcWaitUntilGetFinished or reset() before setting it again");
            }
            publish(op, key, k, e, value, getCount);
        } finally {
            exit();
        }
    }

    /** Takes ticket numbers for the value and writes its description into each; the key is claimed already. */
    private void publish(String op, String key, String k, long e, Tensor value, int getCount) {
        Tensor own = value.is_contiguous() ? new Tensor(value) : value.contiguous();
        NetworkStoreValue entry = null;
        try {
            ScalarType dtype = TorchTensors.dtype(own);
            long[] shape = TorchTensors.shape(own);
            long last = clients.call(op, c -> c.add(published(k), getCount));
            entry = new NetworkStoreValue(key, e, last - getCount + 1, getCount, own);
            produced.put(key, entry);
            setThisEpoch.add(key);
            String description = new Published(rank(), entry.serial, getCount, dtype, shape).encode();
            NetworkStoreValue publishing = entry;
            clients.call(op, c -> {
                long first = publishing.serial;
                long count = getCount;
                while (count > 0) {
                    long abandoned = 0;
                    for (long t = first; t < first + count; t++) {
                        publishing.tickets.add(t);
                        if (!c.compareSet(ticket(k, t), "", description).equals(description)) {
                            c.deleteKey(ticket(k, t)); // a consumer gave this number up: the value goes to the next one
                            abandoned++;
                        }
                    }
                    count = abandoned;
                    first = count == 0 ? first : c.add(published(k), count) - count + 1;
                }
                return null;
            });
        } catch (RuntimeException failure) {
            if (entry != null) {
                produced.remove(key, entry);
                entry.drop(gloo);
            } else {
                own.close();
            }
            try {
                clients.call(op, c -> c.deleteKey(live(k)));
            } catch (RuntimeException ignored) {
                // the rendezvous failed: the key cannot be freed there
            }
            throw failure;
        }
    }

    @Override
    public void srcWaitUntilGetFinished(String key, DeviceStream stream) {
        String op = guard.describe("srcWaitUntilGetFinished", key);
        guard.checkKey(key, "srcWaitUntilGetFinished");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            NetworkStoreValue p = produced.get(key);
            if (p == null) {
                throw new IllegalStateException(op + ": the key is not live here (never set by this rank, already waited for, or reset); "
                    + "only its producer waits for it");
            }
            String k = tensorKey(members.lifetime(), p.epoch, key);
            long traced = Tracer.now();
            NetworkStoreClients.Outcome outcome = clients.await(op, List.of(done(k, p.serial)), deadline);
            if (outcome != NetworkStoreClients.Outcome.ARRIVED) {
                if (outcome == NetworkStoreClients.Outcome.CLOSED) {
                    throw guard.closedError(op);
                }
                long finished = finishedCount(op, p);
                String seen = finished + " of " + p.getCount + " consumers finished (" + p.took() + " took the tensor)";
                throw outcome == NetworkStoreClients.Outcome.TIMED_OUT ? new CommTimeoutException(op + " " + deadline.timedOutAfter() + ": " + seen)
                    : new CommInterruptedException(op + " was interrupted: " + seen, new InterruptedException());
            }
            Tracer.storeWait("srcWaitUntilGetFinished", key, traced);
            // Every consumer received its bytes before it finished: the sends are complete.
            p.awaitSends(gloo, deadline, op);
            produced.remove(key, p);
            p.drop(gloo);
            clients.call(op, c -> {
                c.deleteKey(done(k, p.serial));
                c.deleteKey(finished(k, p.serial));
                for (long t : p.tickets) {
                    c.deleteKey(ticket(k, t)); // taken tickets are gone already; this is a no-op for them
                }
                return c.deleteKey(live(k)); // last: the key may be set again
            });
        } finally {
            exit();
        }
    }

    @Override
    public Tensor destGet(String key, DeviceStream stream) {
        String op = guard.describe("destGet", key);
        guard.checkKey(key, "destGet");
        Objects.requireNonNull(stream, "stream");
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            long e = epoch;
            String k = tensorKey(members.lifetime(), e, key);
            long traced = Tracer.now();
            long number = clients.call(op, c -> c.add(takes(k), 1));
            String ticket = ticket(k, number);
            String value;
            waitingTickets.add(ticket);
            try {
                NetworkStoreClients.Outcome outcome = clients.await(op, List.of(ticket), deadline);
                if (guard.isClosed()) {
                    abandonQuietly(ticket); // close() did, unless it ran before this ticket was known
                    throw guard.closedError(op);
                }
                if (outcome == NetworkStoreClients.Outcome.ARRIVED) {
                    value = clients.call(op, c -> c.get_to_str(ticket));
                } else {
                    // Give the ticket up, unless a producer filled it meanwhile: then take the value after all.
                    value = clients.call(op, c -> c.compareSet(ticket, "", ABANDONED));
                    if (value.equals(ABANDONED)) {
                        long set = clients.call(op, c -> c.add(published(k), 0));
                        String seen = "no producer set this key (this take is the key's number " + number + "; " + set
                            + " were published, at rendezvous " + clients.address() + ")";
                        throw outcome == NetworkStoreClients.Outcome.TIMED_OUT
                            ? new CommTimeoutException(op + " " + deadline.timedOutAfter() + ": " + seen)
                            : new CommInterruptedException(op + " was interrupted: " + seen, new InterruptedException());
                    }
                }
            } finally {
                waitingTickets.remove(ticket);
            }
            Tracer.storeWait("destGet", key, traced);
            clients.call(op, c -> c.deleteKey(ticket));
            Published p = Published.parse(value);
            Tensor result;
            try {
                result = p.producer() == rank() ? takeLocally(op, key, p) : receive(op, key, e, p);
            } catch (RuntimeException failure) {
                if (guard.isClosed()) {
                    throw (IllegalStateException) guard.closedError(op).initCause(failure);
                }
                throw failure;
            }
            taken.compute(key, (unused, q) -> {
                Deque<Take> takes = q == null ? new ArrayDeque<>() : q;
                takes.addLast(new Take(e, p.serial(), p.getCount()));
                return takes;
            });
            return result;
        } finally {
            exit();
        }
    }

    /** A copy of a value this rank set itself (Gloo sends to no rank itself). */
    private Tensor takeLocally(String op, String key, Published p) {
        NetworkStoreValue mine = produced.get(key);
        if (mine == null || mine.serial != p.serial()) {
            throw new IllegalStateException(op + ": the ticket names this rank as the producer of set " + p.serial()
                + ", which it no longer holds (reset?)");
        }
        return mine.copyForSelf();
    }

    /** Asks the producer for the bytes of {@code p} and receives them into a new tensor. */
    private Tensor receive(String op, String key, long e, Published p) {
        Tensor result;
        synchronized (received) {
            result = received.empty(p.shape(), p.dtype());
        }
        int tag = tags.getAndIncrement() & Integer.MAX_VALUE;
        Work work = null;
        try {
            if (p.nbytes() > 0) {
                work = gloo.recv(result, p.producer(), tag);
            }
            byte[] request = new TakeRequest(e, p.serial(), rank(), tag, key).encode().getBytes(StandardCharsets.UTF_8);
            clients.call(op, c -> {
                try (ByteVector bytes = new ByteVector(request)) {
                    c.queuePush(requests(members.lifetime(), p.producer()), bytes);
                }
                return null;
            });
            if (work != null) {
                Work receiving = work;
                work = null; // await keeps or closes it
                gloo.await(receiving, Deadline.after(timeout()), op + ": receiving " + TorchTensors.dtypeName(p.dtype())
                    + java.util.Arrays.toString(p.shape()) + " from rank " + p.producer() + " on host '" + members.hostOf(p.producer())
                    + "' (gloo " + members.glooAddressOf(p.producer()) + ")");
            }
            return result;
        } catch (RuntimeException failure) {
            if (work != null) {
                gloo.linger(work);
            }
            result.close();
            throw failure;
        }
    }

    @Override
    public void destFinishGet(String key, DeviceStream stream) {
        String op = guard.describe("destFinishGet", key);
        guard.checkKey(key, "destFinishGet");
        Objects.requireNonNull(stream, "stream");
        enter(op);
        try {
            Take[] took = new Take[1];
            taken.computeIfPresent(key, (unused, q) -> {
                took[0] = q.pollFirst();
                return q.isEmpty() ? null : q;
            });
            Take take = took[0];
            if (take == null || take.epoch != epoch) {
                NetworkStoreValue mine = produced.get(key);
                long finished = mine == null ? 0 : finishedCount(op, mine);
                if (mine != null && finished >= mine.getCount) {
                    throw new IllegalStateException(op + ": more finishes than getCount; the key is " + mine.counts(finished));
                }
                throw new IllegalStateException(op + ": no destGet of this key is outstanding"
                    + (take == null ? "" : " (reset() dropped the take)"));
            }
            String k = tensorKey(members.lifetime(), take.epoch, key);
            long finished = clients.call(op, c -> c.add(finished(k, take.serial), 1));
            if (finished == take.getCount) {
                clients.call(op, c -> {
                    c.set(done(k, take.serial), "1");
                    return null;
                });
            }
        } finally {
            exit();
        }
    }

    @Override
    public void reset() {
        barrier();
        enter("reset() on " + who);
        try {
            long old = epoch;
            List<NetworkStoreValue> dropped = new ArrayList<>(produced.values());
            produced.clear();
            taken.clear();
            for (NetworkStoreValue p : dropped) {
                p.drop(gloo);
            }
            clients.call("reset() on " + who, c -> {
                for (String key : setThisEpoch) {
                    String k = tensorKey(members.lifetime(), old, key);
                    c.deleteKey(live(k));
                    c.deleteKey(published(k));
                    c.deleteKey(takes(k));
                }
                for (NetworkStoreValue p : dropped) {
                    String k = tensorKey(members.lifetime(), old, p.key);
                    for (long t : p.tickets) {
                        c.deleteKey(ticket(k, t));
                    }
                    c.deleteKey(finished(k, p.serial));
                    c.deleteKey(done(k, p.serial));
                }
                return null;
            });
            setThisEpoch.clear();
            epoch = old + 1;
        } finally {
            exit();
        }
        barrier();
    }

    @Override
    public void barrier() {
        String op = "barrier() on " + who;
        Deadline deadline = Deadline.after(timeout());
        enter(op);
        try {
            members.barrier(deadline, op);
        } finally {
            exit();
        }
    }

    /**
     * Leaves the store: blocked callers wake with {@link IllegalStateException} (a consumer's ticket is abandoned, a
     * receive aborted), the sender stops, values this rank set and nobody waited for are dropped, and this rank's
     * keys are freed at the rendezvous. Bounded by the store's timeout; if a call is still inside Gloo then, the
     * group is left to the process's end rather than destroyed under it (logged).
     */
    @Override
    public void close() {
        if (!guard.markClosed()) {
            return;
        }
        waitingTickets.forEach(this::abandonQuietly);
        clients.wakeWaiters();
        if (gloo != null) {
            gloo.abortAll();
        }
        boolean quiet = calls.writeLock().tryLock();
        try {
            quiet = quiet || calls.writeLock().tryLock(timeout().toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            if (sender != null) {
                sender.stop(timeout());
            }
            for (NetworkStoreValue p : produced.values()) {
                p.drop(gloo);
            }
            produced.clear();
            members.leave();
            clients.close();
            synchronized (received) {
                received.close();
            }
            if (gloo != null) {
                if (quiet && !sender.isAlive()) {
                    gloo.close();
                } else {
                    LOG.log(System.Logger.Level.WARNING, "close() of " + who + ": a call is still inside Gloo after "
                        + Deadline.format(timeout()) + "; its group stays until the process ends");
                }
            }
        } finally {
            if (quiet) {
                calls.writeLock().unlock();
            }
        }
    }

    /** Gives a ticket up, if nobody filled it, on the way out; the waiter wakes through wakeWaiters anyway. */
    private void abandonQuietly(String ticket) {
        try {
            clients.call("close() of " + who, c -> c.compareSet(ticket, "", ABANDONED));
        } catch (RuntimeException e) {
            // the rendezvous failed, or this rank's clients are closed already
        }
    }

    private static long receiveCacheBytes() {
        String text = System.getProperty(RECEIVE_CACHE_PROPERTY);
        if (text == null || text.isBlank()) {
            return DEFAULT_RECEIVE_CACHE_BYTES;
        }
        try {
            long bytes = Long.parseLong(text.strip());
            if (bytes >= 0) {
                return bytes;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new IllegalArgumentException("system property " + RECEIVE_CACHE_PROPERTY + " must be a whole number of bytes, 0 or more, got '"
            + text + "'");
    }

    private long finishedCount(String op, NetworkStoreValue p) {
        String k = tensorKey(members.lifetime(), p.epoch, p.key);
        return clients.call(op, c -> c.add(finished(k, p.serial), 0));
    }

    /** Refused: a Network store cannot share memory between hosts. Allocate with libtorch and {@code srcSet} the value. */
    @Override
    public Tensor allocate(long[] shape, ScalarType dtype) {
        throw new UnsupportedOperationException("allocate() on " + who + ": a Network store cannot share memory between hosts; "
            + "make the tensor with libtorch and srcSet it");
    }

    /** True once {@link #close()} was called. */
    public boolean isClosed() {
        return guard.isClosed();
    }

    /** Number of keys this rank set and did not wait for yet; for tests and diagnostics. */
    public int liveKeyCount() {
        return produced.size();
    }

    /** This participant's host identity, as the errors name it. */
    public String hostId() {
        return info().hostId();
    }

    // ---- bookkeeping ---------------------------------------------------------------------------------

    /** Holds off close() for the duration of one call; close() waits for the calls in flight, up to the timeout. */
    private void enter(String op) {
        guard.ensureOpen(op);
        calls.readLock().lock();
        if (guard.isClosed()) {
            calls.readLock().unlock();
            throw guard.closedError(op);
        }
    }

    private void exit() {
        calls.readLock().unlock();
    }

    /** One finished-or-not take of this rank: which set of the key, and for how many consumers. */
    private record Take(long epoch, long serial, int getCount) {
    }
}
