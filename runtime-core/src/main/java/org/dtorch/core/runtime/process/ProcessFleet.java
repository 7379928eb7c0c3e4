package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.NetworkPromises;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.DeviceFleet;
import org.dtorch.core.runtime.DeviceNode;
import org.dtorch.core.runtime.FailureRegistry;
import org.dtorch.core.runtime.RuntimeOptions;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.trace.Tracer;

/**
 * Per-device-process mode's fleet, and a run across nodes': one worker JVM per device ({@link WorkerPool} starts them
 * on one host; across nodes {@link NodeLaunch} starts node 0's and has the other nodes' {@link NodeAgent}s start
 * theirs; {@link WorkerProcess} is the controller's handle, {@link WorkerMain} the worker's entry point). Operators
 * cross as encoded control messages ({@link OperatorEncoder}), failures are recorded on a {@link SharedFailureBoard}
 * (across nodes, each node's and the run's rendezvous: {@link NodeFailureBoard}), and promises are FILE ones that the
 * workers complete through shared memory (NETWORK ones for the devices of other nodes).
 *
 * <p>A worker that dies is noticed within milliseconds (the JVM's process reaper): every pending operator fails with
 * a {@link WorkerDiedException} naming the device and the exit status, the other workers are cancelled and stopped,
 * and the {@link DeviceFleet.Owner owner} is told. A promise error a worker reports is passed on at once, except one
 * of a kind that {@link FailureKind#mayHideADeadPeer may hide a dead peer}: that one waits {@value #DEATH_GRACE_MILLIS}
 * ms for news of a death, so that the future names the dead device rather than the broken connection.
 *
 * <p>The workers record this process's trace sessions: a session open when they start, through a part file each writes
 * at its end (read after the workers exit, so no control frame is needed), and profiler windows through control
 * frames.
 *
 * <p>Thread-safe: {@link #createNodes} once; worker reports and exits arrive on their threads; the rest from any thread.
 */
public final class ProcessFleet implements DeviceFleet {
    private static final System.Logger LOG = System.getLogger(ProcessFleet.class.getName());
    /** How long a failure that may hide a dead peer waits for news of the death before it is reported as it is. */
    static final long DEATH_GRACE_MILLIS = 300;

    private final RuntimeOptions options;
    private final List<Device> devices;
    private final String instanceId;
    private final ThreadGroupManager groups;
    private final SharedFailureBoard board;
    private final OperatorEncoder encoder;
    /** The other nodes of a run across hosts, or null on one host. */
    private final NodeLaunch nodes;
    private final ScheduledExecutorService failureTimer;
    private final Map<Long, WorkerProcess> workers = new LinkedHashMap<>();
    /** Serializes the handling of worker deaths (not the runtime's monitor, which close() holds while it waits). */
    private final Object deathLock = new Object();
    private LogicalGraph graph;
    private Owner owner;
    private volatile Throwable brokenBy;
    private volatile boolean closing;
    /** Set before the fleet kills its own workers: their deaths are then no failure. */
    private volatile boolean killing;
    private final WorkerTraces traces = new WorkerTraces();

    private ProcessFleet(RuntimeOptions options, List<Device> devices, String instanceId) {
        this.options = options;
        this.devices = devices;
        this.instanceId = instanceId;
        this.groups = new ThreadGroupManager(options.sameDevice(), instanceId, options.timeout(), ThreadGroupManager.Role.CONTROLLER);
        try {
            this.board = SharedFailureBoard.create(SharedRegion.PREFIX + instanceId + "-failures");
        } catch (RuntimeException e) {
            groups.close();
            throw e;
        }
        try {
            this.nodes = options.nodes() == null ? null : NodeLaunch.open(options, instanceId);
        } catch (RuntimeException e) {
            board.unlink();
            board.close();
            groups.close();
            throw e;
        }
        // Workers on other hosts cannot map this host's shared memory: their operators carry every tensor inline.
        this.encoder = new OperatorEncoder(nodes == null ? SharedRegion.PREFIX + instanceId : null);
        this.failureTimer = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon()
            .name("dtorch-failure-timer").unstarted(r));
    }

    /** The fleet of a runtime with {@link RuntimeOptions#workerProcesses()}; {@link #createNodes} starts the workers. */
    public static ProcessFleet create(RuntimeOptions options, List<Device> devices, String instanceId) {
        return new ProcessFleet(options, devices, instanceId);
    }

    @Override
    public Map<Long, DeviceNode> createNodes(LogicalGraph graph, Owner owner) {
        this.graph = graph;
        this.owner = owner;
        workers.putAll(nodes == null ? WorkerPool.start(options, devices, instanceId, board.name(), graph, encoder, new WorkerEvents())
            : nodes.start(devices, board.name(), graph, encoder, new WorkerEvents()));
        return new LinkedHashMap<>(workers);
    }

    @Override
    public ThreadGroupManager groups() {
        return groups;
    }

    @Override
    public FailureRegistry failures() {
        return board;
    }

    /**
     * FILE, for CPU devices too: values are produced in the worker processes. (DTorch keeps CPU on MEMORY
     * because its CPU kernels run in the controller's process; here CPU devices have worker processes of their own.)
     * Devices on other nodes complete NETWORK promises instead ({@link #newPromise}).
     */
    @Override
    public TensorPromiseType promiseType() {
        return TensorPromiseType.FILE;
    }

    /** A FILE promise for a device of this host; a NETWORK one kept in the run's rendezvous for a device of another node. */
    @Override
    public TensorPromise newPromise(long device, Duration timeout, ExpectedValue expected) {
        if (nodes != null && nodes.isRemote(device)) {
            return NetworkPromises.create(nodes.rendezvous().host(), nodes.rendezvous().port(), timeout);
        }
        return DeviceFleet.super.newPromise(device, timeout, expected);
    }

    @Override
    public VoidPromise newVoidPromise(long device, Duration timeout) {
        if (nodes != null && nodes.isRemote(device)) {
            return NetworkPromises.createVoid(nodes.rendezvous().host(), nodes.rendezvous().port(), timeout);
        }
        return DeviceFleet.super.newVoidPromise(device, timeout);
    }

    /** An operator crosses to the workers only through a codec. */
    @Override
    public void checkRunnable(Operator op) {
        OpSpecCodecs.require(op.spec());
    }

    /** The workers run the kernels: data the spec held for them in this process can go. */
    @Override
    public void dispatched(Operator op) {
        op.spec().sentToWorkers();
    }

    @Override
    public Throwable brokenBy() {
        return brokenBy;
    }

    @Override
    public Map<Long, Long> workerPids() {
        Map<Long, Long> pids = new LinkedHashMap<>();
        workers.forEach((id, w) -> pids.put(id, w.pid()));
        return pids;
    }

    @Override
    public void awaitReported(Duration timeout) {
        workers.values().forEach(w -> w.awaitReported(timeout));
    }

    @Override
    public void traceNodes(Consumer<Runnable> inOrder) {
        traces.inOrder = inOrder;
        if (Tracer.enabled()) {
            traces.recording.addAll(workers.values()); // started with --trace-from-start: they record already
        }
        Tracer.register(traces);
    }

    @Override
    public void closing() {
        closing = true;
    }

    @Override
    public void forceStop() {
        killWorkers();
    }

    @Override
    public void cancel(CommException cause, LogicalGraph pending) {
        workers.values().forEach(w -> w.cancel(cause));
        for (Operator op : pending.pendingInOrder()) {
            op.spec().abandon(brokenBy != null ? brokenBy : cause);
        }
    }

    /** A worker blocked in a collective is freed by its own CANCEL; nothing to do here. */
    @Override
    public void unblockDevices() {
    }

    @Override
    public void leftBehind(Map<Long, DeviceNode> running) throws InterruptedException {
        running.keySet().forEach(device -> LOG.log(System.Logger.Level.WARNING, "device " + device + " did not stop within the"
            + " teardown grace; killing its worker process"));
        killWorkers();
        for (DeviceNode node : running.values()) {
            node.join(Duration.ofSeconds(2));
        }
    }

    @Override
    public void release() {
        Tracer.unregister(traces);
        try {
            killWorkers();
            mergeTraceParts();
            failureTimer.shutdownNow();
            if (nodes != null) {
                nodes.close();
            }
            encoder.releaseAll();
            board.unlink();
            board.close();
            try {
                SharedRegion.unlinkAll(SharedRegion.PREFIX + instanceId + "-"); // what a killed worker's stores left
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "cannot remove the shared memory of runtime " + instanceId + ": " + e);
            }
        } finally {
            groups.close();
        }
    }

    /**
     * Hands the trace each worker wrote at its end (a runtime started while the tracer recorded) to the tracer, and
     * removes it; a worker killed before it finished writing leaves a part that is skipped with a warning.
     */
    private void mergeTraceParts() {
        for (WorkerProcess worker : workers.values()) {
            Path part = WorkerPool.tracePart(instanceId, worker.device());
            try {
                if (Files.exists(part) && worker.join(Duration.ofSeconds(2))) {
                    Tracer.addPart(part);
                }
            } catch (IOException e) {
                LOG.log(System.Logger.Level.WARNING, "cannot read the trace of " + worker.device() + "'s worker: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The workers' side of the tracer's windows: {@code TRACE_START} and {@code TRACE_STOP} queued by
     * the controller in order with the operators, and each recording worker's {@code TRACE_EVENTS} awaited within the
     * runtime's timeout.
     *
     * <p>Thread-safe: called under the tracer's lock.
     */
    private final class WorkerTraces implements Tracer.Remote {
        /** Runs an action on the controller in order with the operators; set before registration. */
        private volatile Consumer<Runnable> inOrder;
        /** The workers asked to record (and so to answer the next stop). */
        private final List<WorkerProcess> recording = new CopyOnWriteArrayList<>();

        @Override
        public void traceStarted() {
            if (brokenBy != null) {
                return; // the workers are stopping: the window has the host's events only
            }
            List<WorkerProcess> asked = workers.values().stream().filter(WorkerProcess::isAlive).toList();
            recording.addAll(asked);
            inOrder.accept(() -> asked.forEach(WorkerProcess::queueTraceStart));
        }

        @Override
        public List<byte[]> traceStopped() {
            List<WorkerProcess> asked = List.copyOf(recording);
            recording.clear();
            Map<WorkerProcess, CompletableFuture<byte[]>> replies = new LinkedHashMap<>();
            asked.forEach(w -> replies.put(w, w.expectTrace()));
            inOrder.accept(() -> asked.forEach(WorkerProcess::queueTraceStop));
            Deadline deadline = Deadline.after(options.timeout());
            List<byte[]> parts = new ArrayList<>();
            List<String> missing = new ArrayList<>();
            for (Map.Entry<WorkerProcess, CompletableFuture<byte[]>> reply : replies.entrySet()) {
                try {
                    parts.add(reply.getValue().get(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS));
                } catch (TimeoutException e) {
                    missing.add(reply.getKey().device() + "'s worker (pid " + reply.getKey().pid() + ") sent none "
                        + deadline.timedOutAfter());
                } catch (ExecutionException e) {
                    missing.add(e.getCause().getMessage());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    missing.add(reply.getKey().device() + "'s worker: interrupted while waiting for its trace");
                }
            }
            if (!missing.isEmpty()) {
                throw new IllegalStateException("Tracer.stop: the trace events of " + missing.size() + " of " + asked.size()
                    + " worker processes of runtime " + instanceId + " did not come: " + String.join("; ", missing));
            }
            return parts;
        }
    }

    /** Kills every worker process still alive (SIGKILL); their deaths are expected and not reported as failures. */
    private void killWorkers() {
        killing = true;
        workers.values().forEach(WorkerProcess::destroy);
    }

    /** What the fleet hears from its worker processes. */
    private final class WorkerEvents implements WorkerProcess.Events {

        @Override
        public void operatorFailed(WorkerProcess worker, Operator op, FailureKind kind, String text) {
            RemoteFailureException reported = new RemoteFailureException(kind, text);
            if (!kind.mayHideADeadPeer() || brokenBy != null) {
                op.spec().abandon(brokenBy != null ? brokenBy : reported);
                return;
            }
            failureTimer.schedule(() -> {
                Throwable death = brokenBy != null ? brokenBy : deadWorkerNow();
                op.spec().abandon(death != null ? death : reported);
            }, DEATH_GRACE_MILLIS, TimeUnit.MILLISECONDS);
        }

        @Override
        public void exited(WorkerProcess worker, int status, String fatal) {
            if (closing && (killing || status == 0) && fatal == null) {
                return; // close() completed or cancelled everything this worker had
            }
            WorkerDiedException lost = worker.lost();
            workerDied(worker, lost != null ? lost : new WorkerDiedException(worker.device(), worker.pid(), status, fatal));
        }
    }

    /** A worker that has exited already, as a cause, or null. */
    private Throwable deadWorkerNow() {
        for (WorkerProcess w : workers.values()) {
            if (!w.isAlive()) {
                return new WorkerDiedException(w.device(), w.pid(), w.exitStatusNow(), null);
            }
        }
        return null;
    }

    private void workerDied(WorkerProcess dead, WorkerDiedException death) {
        synchronized (deathLock) {
            if (brokenBy == null) {
                brokenBy = death;
                if (!closing) {
                    LOG.log(System.Logger.Level.ERROR, death.getMessage() + "; failing every pending operator and stopping the other workers");
                }
                Owner told = owner;
                if (told != null) {
                    told.broken(death);
                }
            }
            dead.markDead(death);
            LogicalGraph g = graph;
            if (g != null) {
                for (Operator op : g.pendingInOrder()) {
                    op.spec().abandon(brokenBy);
                }
            }
            for (WorkerProcess w : workers.values()) {
                if (w != dead && w.isAlive()) {
                    w.cancel(brokenBy);
                    w.stop();
                }
            }
            if (nodes != null) {
                nodes.endRun(); // the other nodes' agents stop too, and clean up their hosts
            }
        }
    }
}
