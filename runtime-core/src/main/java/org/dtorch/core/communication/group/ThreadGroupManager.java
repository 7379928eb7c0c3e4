package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.DeviceKind;

/**
 * Creates and caches {@link ThreadGroup}s, one per rank per {@link ThreadGroupKey} (seed section 2.4).
 * One manager serves every device thread of a runtime, and every kernel shares it.
 *
 * <p>{@link #getThreadGroup} on the thread of device {@code d} returns the group instance of {@code d}'s
 * rank, creating it on first use; creation blocks until every rank of the group has arrived. Rendezvous
 * names are namespaced by the manager's instance id ({@link GlobalCommInstanceId}), so two runtimes on
 * one host never meet by accident; they are derived from the key alone, so processes of one runtime
 * (which share the instance id) meet.
 *
 * <p>{@link #close()} destroys every group in the order of {@link ThreadGroupKey#sortKey()}, the same
 * order on every rank and process; the seed requires it because NCCL communicators destroyed in
 * different orders on different ranks deadlock. It then deletes the instance's rendezvous directory, if
 * this manager owns it.
 *
 * <p>Thread-safe: any device thread may call {@link #getThreadGroup} concurrently; {@link #close()} runs
 * once, after the device threads stopped using their groups.
 */
public final class ThreadGroupManager implements AutoCloseable {
    private static final int MAX_READABLE_NAME = 80;

    private final boolean dtensorInSameDevice;
    private final String instanceId;
    private final Duration timeout;
    private final Map<ThreadGroupKey, Slots> groups = new ConcurrentHashMap<>();
    private final List<ThreadGroupKey> destroyed = new CopyOnWriteArrayList<>();
    private final CollectiveCounter counter = new CollectiveCounter();
    private final Role role;
    private volatile boolean closed;

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
            ThreadGroup group = slots.groups[rank];
            if (group == null) {
                group = new ThreadGroup(slots.initPath, kind, key.deviceIds(), rank, key.size(), dtensorInSameDevice, timeout, counter);
                try {
                    group.barrier();
                } catch (RuntimeException e) {
                    group.close();
                    throw e;
                }
                slots.groups[rank] = group;
            }
            return group;
        }
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

    /** The store backend kernels use between the ranks: MEMORY for threads of one process, FILE for processes. */
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
            for (int rank = 0; rank < slots.groups.length; rank++) {
                synchronized (slots.locks[rank]) {
                    ThreadGroup group = slots.groups[rank];
                    if (group == null) {
                        continue;
                    }
                    try {
                        group.close();
                    } catch (RuntimeException e) {
                        first = first == null ? e : first;
                    }
                    slots.groups[rank] = null;
                }
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
        if (closed) {
            throw new IllegalStateException("ThreadGroupManager " + instanceId + " is closed; cannot get group " + key);
        }
    }

    /** The per-rank group instances of one key, each guarded by its own lock. */
    private static final class Slots {
        final String initPath;
        final ThreadGroup[] groups;
        final Object[] locks;

        Slots(String initPath, int size) {
            this.initPath = Objects.requireNonNull(initPath);
            this.groups = new ThreadGroup[size];
            this.locks = new Object[size];
            for (int i = 0; i < size; i++) {
                locks[i] = new Object();
            }
        }
    }

    /** For diagnostics: how many group instances exist. */
    int liveGroupCount() {
        List<ThreadGroup> live = new ArrayList<>();
        for (Slots s : groups.values()) {
            for (ThreadGroup g : s.groups) {
                if (g != null) {
                    live.add(g);
                }
            }
        }
        return live.size();
    }
}
