package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.stream.Collectors;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.device.DeviceKind;

/**
 * Creates and caches {@link ThreadGroup}s, one per rank per {@link ThreadGroupKey} (docs/communication-core.md, "ThreadGroupManager").
 * One manager serves every device thread of a runtime, and every kernel shares it.
 *
 * <p>{@link #getThreadGroup} on the thread of device {@code d} returns the group instance of {@code d}'s
 * rank, creating it on first use; creation blocks until every rank of the group has arrived. Rendezvous
 * names are namespaced by the manager's instance id ({@link GlobalCommInstanceId}), so two runtimes on
 * one host never meet by accident; they are derived from the key alone, so processes of one runtime
 * (which share the instance id) meet.
 *
 * <p>{@link #close()} destroys every group in the order of {@link ThreadGroupKey#sortKey()}, the same
 * order on every rank and process; DTorch requires it because NCCL communicators destroyed in
 * different orders on different ranks deadlock. It then deletes the instance's rendezvous directory, if
 * this manager owns it.
 *
 * <p>When every rank is a thread of this process ({@link Role#ONE_PROCESS}), the ranks of a new group
 * first meet in this manager, where waiting can be interrupted and aborted, and only then start the
 * backend's own rendezvous (c10d's, which nothing can interrupt), which then finds every rank present.
 *
 * <p>{@link #abort(String)} is for shutdown: it wakes ranks waiting for a group to form and releases every
 * group instance that no collective is using (see {@link ThreadGroup#abort(String)}), so that ranks blocked
 * in a collective whose peers will never come fail within milliseconds. Call it again until it reports
 * nothing busy.
 *
 * <p>Thread-safe: any device thread may call {@link #getThreadGroup} concurrently; {@link #abort(String)}
 * from any thread at any time; {@link #close()} runs once, after the device threads stopped using their
 * groups (an instance still in use then is left to its thread, with a warning).
 */
public final class ThreadGroupManager implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(ThreadGroupManager.class.getName());
    private static final int MAX_READABLE_NAME = 80;

    private final boolean dtensorInSameDevice;
    private final String instanceId;
    private final Duration timeout;
    private final Map<ThreadGroupKey, Slots> groups = new ConcurrentHashMap<>();
    private final List<ThreadGroupKey> destroyed = new CopyOnWriteArrayList<>();
    private final CollectiveCounter counter = new CollectiveCounter();
    /**
     * System property: the address Gloo listens on (default 127.0.0.1). Across nodes it must be this node's address on
     * the run's network: a run across nodes sets it for its workers to the address they reach the controller from.
     */
    public static final String GLOO_HOSTNAME_PROPERTY = "dtorch.gloo.hostname";
    private final Role role;
    /** Where Gloo and NCCL ranks meet when they span hosts; null: a FileStore under the instance's directory. */
    private final RendezvousAddress rendezvous;
    private volatile boolean closed;
    private volatile String abortedBy;

    /** Where the manager's ranks live, which decides who owns the rendezvous files and which stores kernels use. */
    public enum Role {
        /** Every rank is a thread of this process: memory stores; this manager owns the rendezvous files. */
        ONE_PROCESS,
        /** The controller of a runtime whose ranks are worker processes: it owns the rendezvous files. */
        CONTROLLER,
        /** A worker process of such a runtime: File stores; the controller removes the rendezvous files. */
        WORKER
    }

    /**
     * A manager with a fresh instance id and the global timeout.
     *
     * @param dtensorInSameDevice true when all devices of the runtime are simulated on one physical device
     *                            (groups then use the same-device backend)
     */
    public ThreadGroupManager(boolean dtensorInSameDevice) {
        this(dtensorInSameDevice, GlobalCommInstanceId.next(), CommOptions.global().timeout());
    }

    /** A manager with an explicit instance id and deadline, for ranks that are threads of this process. */
    public ThreadGroupManager(boolean dtensorInSameDevice, String instanceId, Duration timeout) {
        this(dtensorInSameDevice, instanceId, timeout, Role.ONE_PROCESS);
    }

    /**
     * A manager with an explicit instance id (shared by the processes of one runtime), deadline and role.
     * Only a {@link Role#WORKER} leaves the instance's rendezvous directory in place when it closes: the
     * controller removes it last.
     */
    public ThreadGroupManager(boolean dtensorInSameDevice, String instanceId, Duration timeout, Role role) {
        this(dtensorInSameDevice, instanceId, timeout, role, null);
    }

    /**
     * As {@link #ThreadGroupManager(boolean, String, Duration, Role)}, for ranks on several hosts: every Gloo and NCCL
     * group meets at {@code rendezvous} (the run's c10d {@code TCPStore} server, the same address in every process of
     * the run) under its unique name, and kernels' operation stores are picked by where their participants are
     * ({@link org.dtorch.core.communication.store.TensorStore#createForParticipants}: Memory, File, or Network between
     * hosts). The same-device backend is unchanged (its ranks share one device, so one host).
     *
     * @param rendezvous the run's rendezvous, or null for a FileStore under the instance's directory (one host)
     */
    public ThreadGroupManager(boolean dtensorInSameDevice, String instanceId, Duration timeout, Role role, RendezvousAddress rendezvous) {
        this.rendezvous = rendezvous;
        this.role = java.util.Objects.requireNonNull(role, "role");
        if (instanceId == null || instanceId.isBlank()) {
            throw new IllegalArgumentException("instanceId must be non-blank");
        }
        this.dtensorInSameDevice = dtensorInSameDevice;
        this.instanceId = GlobalCommInstanceId.sanitize(instanceId);
        this.timeout = CommOptions.validateTimeout(timeout);
    }

    /**
     * The group instance of {@code currentDeviceId}'s rank in the group of {@code allDeviceIds}, created
     * (and joined) on first use.
     *
     * @throws IllegalArgumentException if the ids are empty, repeated, or do not contain {@code currentDeviceId}
     * @throws IllegalStateException    after {@link #close()}
     */
    public ThreadGroup getThreadGroup(DeviceKind kind, List<Long> allDeviceIds, long currentDeviceId) {
        ThreadGroupKey key = new ThreadGroupKey(kind, allDeviceIds);
        int rank = key.rankOf(currentDeviceId);
        ensureOpen(key);
        Slots slots = groups.computeIfAbsent(key, k -> new Slots(initPath(k), k.size()));
        synchronized (slots.locks[rank]) {
            ensureOpen(key);
            ThreadGroup group = slots.groups.get(rank);
            if (group == null) {
                if (role == Role.ONE_PROCESS) {
                    slots.awaitAllRanks(key, rank);
                }
                group = new ThreadGroup(slots.initPath, kind, key.deviceIds(), rank, key.size(), dtensorInSameDevice, timeout, counter,
                    rendezvous);
                try {
                    group.barrier();
                } catch (RuntimeException e) {
                    group.close();
                    throw e;
                }
                slots.groups.set(rank, group);
                String aborted = abortedBy; // abort() may have swept the slots before this group was in them
                if (aborted != null) {
                    group.abort(aborted);
                    ensureOpen(key);
                }
            }
            return group;
        }
    }

    /**
     * Shutdown: refuses new groups, wakes ranks waiting for a group to form, and releases every group instance
     * no collective is using (a rank blocked in a collective fails once its peers' instances are gone).
     * Idempotent; call it again until it returns 0.
     *
     * @param reason named in the errors of every call refused from now on
     * @return how many group instances are still busy in a collective
     */
    public int abort(String reason) {
        java.util.Objects.requireNonNull(reason, "reason");
        if (abortedBy == null) {
            abortedBy = reason;
        }
        int busy = 0;
        for (ThreadGroupKey key : keys()) {
            Slots slots = groups.get(key);
            if (slots == null) {
                continue;
            }
            slots.wakeWaiters();
            for (int rank = 0; rank < slots.groups.length(); rank++) {
                ThreadGroup group = slots.groups.get(rank);
                if (group != null && !group.abort(reason)) {
                    busy++;
                }
            }
        }
        return busy;
    }

    /** Counts every collective that this manager's groups ran, per rank and kind. */
    public CollectiveCounter collectiveCounter() {
        return counter;
    }

    /** The instance id that namespaces this manager's rendezvous names. */
    public String instanceId() {
        return instanceId;
    }

    /** Where the ranks live. */
    public Role role() {
        return role;
    }

    /** Where Gloo and NCCL groups meet when the ranks span hosts; null when they meet in a FileStore (one host). */
    public RendezvousAddress rendezvous() {
        return rendezvous;
    }

    /**
     * The store backend kernels use between the ranks: MEMORY for threads of one process, FILE for processes. With a
     * {@link #rendezvous()}, kernels pick the backend of each store by where its participants are instead.
     */
    public org.dtorch.core.communication.store.TensorStoreType storeType() {
        return role == Role.ONE_PROCESS ? org.dtorch.core.communication.store.TensorStoreType.MEMORY
            : org.dtorch.core.communication.store.TensorStoreType.FILE;
    }

    /** True when groups use the same-device backend. */
    public boolean dtensorInSameDevice() {
        return dtensorInSameDevice;
    }

    /** The keys of the groups created so far, sorted. */
    public List<ThreadGroupKey> keys() {
        return groups.keySet().stream().sorted().collect(Collectors.toList());
    }

    /**
     * Destroys every group in sorted-key order and removes the rendezvous directory. Idempotent. Errors
     * while closing one group do not stop the others; the first is rethrown at the end.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        RuntimeException first = null;
        for (ThreadGroupKey key : keys()) {
            Slots slots = groups.get(key);
            slots.wakeWaiters();
            for (int rank = 0; rank < slots.groups.length(); rank++) {
                ThreadGroup group = slots.groups.get(rank);
                if (group == null) {
                    continue;
                }
                try {
                    if (!group.abort("the group manager " + instanceId + " is closed")) {
                        // Its thread is still inside a collective (it outlived the runtime's shutdown): releasing the
                        // backend under it would block or crash; it is left to that thread, which finds it aborted.
                        LOG.log(System.Logger.Level.WARNING, "group " + key + " rank " + rank
                            + " is still in a collective; leaving it to its thread");
                        continue;
                    }
                } catch (RuntimeException e) {
                    first = first == null ? e : first;
                }
                slots.groups.set(rank, null);
            }
            destroyed.add(key);
        }
        groups.clear();
        if (role != Role.WORKER) {
            try {
                CommPaths.deleteRecursively(CommPaths.root().resolve(instanceId));
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    /** The keys in the order {@link #close()} destroyed their groups; for tests. */
    List<ThreadGroupKey> destructionOrder() {
        return List.copyOf(destroyed);
    }

    /** The rendezvous name of a key: the instance id, then a readable key, hashed when long. */
    String initPath(ThreadGroupKey key) {
        String readable = key.kind().shortName() + "-" + key.deviceIds().stream().map(String::valueOf).collect(Collectors.joining("_"));
        if (dtensorInSameDevice) {
            readable = "same-" + readable;
        }
        if (readable.length() > MAX_READABLE_NAME) {
            readable = readable.substring(0, MAX_READABLE_NAME / 2) + "-" + CommPaths.sha256Hex(key.sortKey()).substring(0, 16);
        }
        return instanceId + "/" + readable;
    }

    private void ensureOpen(ThreadGroupKey key) {
        String aborted = abortedBy;
        if (aborted != null) {
            throw new CommException("ThreadGroupManager " + instanceId + " was aborted (" + aborted + "); cannot get group " + key);
        }
        if (closed) {
            throw new IllegalStateException("ThreadGroupManager " + instanceId + " is closed; cannot get group " + key);
        }
    }

    /**
     * The per-rank group instances of one key, each slot guarded by its own lock for creation, and the
     * meeting point of the ranks of a group that is being created in this process.
     */
    private final class Slots {
        final String initPath;
        final AtomicReferenceArray<ThreadGroup> groups;
        final Object[] locks;
        /** Guards {@link #arrived} and {@link #arrivedCount}; notified on every arrival and on abort. */
        private final Object gate = new Object();
        private final boolean[] arrived;
        private int arrivedCount;

        Slots(String initPath, int size) {
            this.initPath = Objects.requireNonNull(initPath);
            this.groups = new AtomicReferenceArray<>(size);
            this.locks = new Object[size];
            this.arrived = new boolean[size];
            for (int i = 0; i < size; i++) {
                locks[i] = new Object();
            }
        }

        /**
         * Records {@code rank}'s arrival and waits until every rank of the group has arrived, so that the
         * backend's rendezvous, which cannot be interrupted, only starts once it can complete.
         */
        void awaitAllRanks(ThreadGroupKey key, int rank) {
            Deadline deadline = Deadline.after(timeout);
            synchronized (gate) {
                if (!arrived[rank]) {
                    arrived[rank] = true;
                    arrivedCount++;
                    gate.notifyAll();
                }
                while (arrivedCount < arrived.length) {
                    String aborted = abortedBy;
                    if (aborted != null || closed) {
                        throw new CommException("creating group " + key + " (rank " + rank + " of " + arrived.length
                            + ") was aborted while waiting for ranks " + missing() + ": " + (aborted != null ? aborted : "the manager is closed"));
                    }
                    long remaining = deadline.remainingNanos();
                    if (remaining <= 0) {
                        throw new CommTimeoutException("creating group " + key + " (rank " + rank + " of " + arrived.length + ") "
                            + deadline.timedOutAfter() + ": " + arrivedCount + " of " + arrived.length + " ranks arrived, still waiting for ranks "
                            + missing());
                    }
                    try {
                        java.util.concurrent.TimeUnit.NANOSECONDS.timedWait(gate, remaining);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new CommInterruptedException("creating group " + key + " (rank " + rank + " of " + arrived.length
                            + ") was interrupted while waiting for ranks " + missing(), e);
                    }
                }
            }
        }

        void wakeWaiters() {
            synchronized (gate) {
                gate.notifyAll();
            }
        }

        /** The ranks that have not arrived; call holding {@link #gate}. */
        private List<Integer> missing() {
            List<Integer> out = new ArrayList<>();
            for (int r = 0; r < arrived.length; r++) {
                if (!arrived[r]) {
                    out.add(r);
                }
            }
            return out;
        }
    }

    /** For diagnostics: how many group instances exist. */
    int liveGroupCount() {
        int live = 0;
        for (Slots s : groups.values()) {
            for (int rank = 0; rank < s.groups.length(); rank++) {
                if (s.groups.get(rank) != null) {
                    live++;
                }
            }
        }
        return live;
    }
}
