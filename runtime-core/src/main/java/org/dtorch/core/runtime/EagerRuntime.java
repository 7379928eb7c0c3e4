package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.communication.promise.VoidFutureCollect;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.GraphMessage;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.process.OpSpecCodecs;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmJanitor;

/**
 * One runtime: a {@link GraphConstructor} for the client, an {@link EagerGraphExecutor} controller thread,
 * and one device node per device, which is a worker thread of this JVM ({@link PerDeviceThreadNodeRunner},
 * thread mode) or a worker JVM of its own ({@link WorkerProcess}, per-device-process mode). Both run the
 * same runner and kernels; in process mode collectives go over Gloo between the processes (NCCL between
 * distinct GPUs, the same-device backend over File stores for ranks that share a device), stores and promises
 * over shared memory (CUDA values through CUDA IPC), and failures are recorded on a {@link SharedFailureBoard}.
 *
 * <p>Starting removes what dead runtime instances left in the shared-memory and rendezvous directories
 * ({@link ShmJanitor}).
 *
 * <p>{@link #close()} refuses new operators, lets the controller dispatch what was queued, waits up to the
 * shutdown timeout for the devices to run it, cancels the rest (their futures fail, naming the shutdown),
 * stops every device, and removes the runtime's shared memory and rendezvous files.
 *
 * <p>In process mode, a worker that dies is noticed within milliseconds: every pending future fails with a
 * {@link WorkerDiedException} naming the device and the exit status, the remaining workers are shut down,
 * and the runtime refuses new operators.
 *
 * <p>Thread-safe: one client thread builds the graph; {@link #close()} may be called from any thread, once.
 */
public final class EagerRuntime implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(EagerRuntime.class.getName());
    /** How long a communication failure waits for news of a dead worker before it is reported as it is. */
    private static final long DEATH_GRACE_MILLIS = 300;
    /** How long {@link #close()} waits for the devices to stop once the queued work is done or cancelled. */
    static final Duration TEARDOWN_GRACE = Duration.ofMillis(1500);
    /** How often {@link #close()} aborts groups again while devices are still blocked in collectives. */
    private static final Duration ABORT_PASS = Duration.ofMillis(20);

    private final RuntimeOptions options;
    private final List<Device> devices;
    private final String instanceId;
    private final ThreadGroupManager groups;
    private final FailureRegistry failures;
    private final LogicalGraph graph;
    private final Map<Long, DeviceNode> nodes = new LinkedHashMap<>();
    private final EagerGraphExecutor controller;
    private final GraphConstructor constructor;
    private final OperatorEncoder encoder;
    private final ScheduledExecutorService failureTimer;
    private volatile Throwable brokenBy;
    private volatile boolean closing;
    /** Set before the runtime kills its own workers: their deaths are then no failure. */
    private volatile boolean killing;
    /** Serializes the handling of worker deaths (not the runtime's monitor, which {@link #close()} holds while it waits). */
    private final Object deathLock = new Object();
    private boolean closed;

    private EagerRuntime(RuntimeOptions options) {
        this.options = options;
        List<Device> all = new ArrayList<>();
        for (int i = 0; i < options.deviceCount(); i++) {
            all.add(new Device(options.deviceKind(), i));
        }
        this.devices = List.copyOf(all);
        ShmJanitor.removeStale();
        this.instanceId = GlobalCommInstanceId.next();
        boolean processes = options.perDevicePerProcess();
        this.groups = new ThreadGroupManager(options.sameDevice(), instanceId, options.timeout(),
            processes ? ThreadGroupManager.Role.CONTROLLER : ThreadGroupManager.Role.ONE_PROCESS);
        if (processes) {
            SharedFailureBoard board = SharedFailureBoard.create(SharedRegion.PREFIX + instanceId + "-failures");
            this.failures = board;
            this.graph = new LogicalGraph(operand -> failures.forget(operand.id()));
            this.encoder = new OperatorEncoder(SharedRegion.PREFIX + instanceId);
            this.failureTimer = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon()
                .name("dtorch-failure-timer").unstarted(r));
            try {
                nodes.putAll(WorkerPool.start(options, devices, instanceId, board.name(), graph, encoder, new WorkerEvents()));
            } catch (RuntimeException e) {
                failureTimer.shutdownNow();
                board.unlink();
                board.close();
                groups.close();
                throw e;
            }
        } else {
            this.failures = FailureRegistry.inMemory();
            this.graph = new LogicalGraph(operand -> failures.forget(operand.id()));
            this.encoder = null;
            this.failureTimer = null;
            for (Device device : devices) {
                nodes.put((long) device.index(), new PerDeviceThreadNodeRunner(device, options.physicalDevice(device), graph, failures, groups,
                    options.timeout()));
            }
        }
        this.controller = new EagerGraphExecutor(graph, nodes);
        this.constructor = new GraphConstructor(this::accept);
        nodes.values().forEach(DeviceNode::start);
        controller.start();
    }

    /**
     * Starts a runtime: worker threads, or worker processes when {@link RuntimeOptions#perDevicePerProcess()}. A
     * CUDA device's worker, thread or process, runs on {@link RuntimeOptions#physicalDevice}; worker processes see
     * the GPUs as this process does and are told their device's index.
     *
     * @throws org.dtorch.core.device.CudaUnavailableException for CUDA devices this process cannot use (the message
     *                                                         names what is missing and the fix)
     * @throws CommException                                   if the worker processes cannot start
     */
    public static EagerRuntime start(RuntimeOptions options) {
        Objects.requireNonNull(options, "options");
        Cuda.loadNatives();
        if (options.deviceKind() == DeviceKind.CUDA) {
            // Also in process mode: the workers see the host's GPUs as this process does (WorkerPool), so a missing
            // GPU is reported here once instead of as every worker's failed start.
            Cuda.requireDevices(options.deviceCount(), options.sameDevice());
        }
        return new EagerRuntime(options);
    }

    private void accept(GraphMessage message) {
        if (message instanceof GraphMessage.AddOperator add) {
            checkDevices(add.operator());
            if (options.perDevicePerProcess()) {
                OpSpecCodecs.require(add.operator().spec());
            }
        }
        controller.accept(message);
    }

    private void checkDevices(Operator op) {
        for (long device : op.devices()) {
            if (!nodes.containsKey(device)) {
                throw new IllegalArgumentException(op.label() + ": device " + device + " is not one of this runtime's "
                    + options.deviceKind().shortName() + " devices 0.." + (devices.size() - 1));
            }
        }
        List<Operand> operands = new ArrayList<>(op.inputs());
        operands.addAll(op.outputs());
        for (Operand operand : operands) {
            checkMeshKind(op, operand.meta().sharding().mesh());
        }
    }

    /**
     * A mesh of the runtime's kind is fine; in a runtime on CUDA a CPU mesh is the host memory of the same workers
     * (decision 141), where only some operators run; anything else is refused.
     */
    private void checkMeshKind(Operator op, DeviceMesh mesh) {
        DeviceKind runtimeKind = options.deviceKind();
        if (mesh.kind() == runtimeKind) {
            return;
        }
        if (runtimeKind != DeviceKind.CUDA || mesh.kind() != DeviceKind.CPU) {
            throw new IllegalArgumentException(op.label() + ": " + mesh + " is not made of this runtime's " + runtimeKind.shortName()
                + " devices");
        }
        if (!op.spec().runsOnHostMeshes(op)) {
            throw new IllegalArgumentException(op.label() + ": " + mesh + " is host memory of this runtime's cuda workers, where only"
                + " factories, tensor(), toTorch() and redistribute or copy_ between a cpu and a cuda mesh run (decision 141);"
                + " redistribute the tensor to a cuda mesh first");
        }
    }

    /** The client's graph constructor. */
    public GraphConstructor graph() {
        return constructor;
    }

    /** The options the runtime started with. */
    public RuntimeOptions options() {
        return options;
    }

    /** The runtime's devices, ids 0 to n-1. */
    public List<Device> devices() {
        return devices;
    }

    /** The id that names this runtime's shared memory and rendezvous files. */
    public String instanceId() {
        return instanceId;
    }

    /**
     * The runtime's group manager. In process mode the groups live in the workers; this one only owns the
     * rendezvous directory, and its collective counter stays at zero.
     */
    public ThreadGroupManager groups() {
        return groups;
    }

    /** The promise type of values produced in this runtime ({@link TensorPromises#typeFor}). */
    public TensorPromiseType promiseType() {
        return TensorPromises.typeFor(options.deviceKind(), options.perDevicePerProcess());
    }

    /** Why the runtime stopped taking operators (a worker died), or null while it is healthy. */
    public Throwable brokenBy() {
        return brokenBy;
    }

    /** The process ids of the workers, by device, in process mode; empty in thread mode. */
    public Map<Long, Long> workerPids() {
        Map<Long, Long> pids = new LinkedHashMap<>();
        nodes.forEach((id, node) -> {
            if (node instanceof WorkerProcess w) {
                pids.put(id, w.pid());
            }
        });
        return pids;
    }

    /**
     * One {@link VoidFuture} per device, done when everything queued to it so far has run, joined; its
     * {@code get()} waits up to the runtime's timeout.
     */
    public VoidFutureCollect syncFuture() {
        List<VoidFuture> futures = new ArrayList<>();
        for (Device device : devices) {
            VoidPromise promise = TensorPromises.createVoid(promiseType(), options.timeout());
            futures.add(promise.getFuture());
            constructor.add(new SyncSpec(promise, device.index()), List.of());
        }
        return new VoidFutureCollect(futures, options.timeout());
    }

    /**
     * Tensors the devices hold, over all devices; for leak checks. In process mode, as the workers reported
     * after running everything sent to them so far (this waits for those reports, up to the timeout).
     */
    public int liveBlobCount() {
        for (DeviceNode node : nodes.values()) {
            if (node instanceof WorkerProcess w) {
                w.awaitReported(options.timeout());
            }
        }
        return nodes.values().stream().mapToInt(DeviceNode::liveBlobs).sum();
    }

    /** Operators queued or running; for diagnostics. */
    public int pendingOperatorCount() {
        return graph.size();
    }

    /** Operands recorded as failed and still in use; for diagnostics. */
    public int failedOperandCount() {
        return failures.size();
    }

    /** What the runtime hears from its worker processes. */
    private final class WorkerEvents implements WorkerProcess.Events {

        @Override
        public void operatorFailed(WorkerProcess worker, Operator op, String text, boolean communication) {
            RemoteFailureException reported = new RemoteFailureException(text);
            if (!communication || brokenBy != null) {
                op.spec().abandon(brokenBy != null ? brokenBy : reported);
                return;
            }
            // A broken collective often means a peer died: give the news of its death a moment to arrive,
            // so that the future names the dead device rather than the broken connection.
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
            WorkerDiedException death = new WorkerDiedException(worker.device(), worker.pid(), status, fatal);
            workerDied(worker, death);
        }
    }

    /** A worker that has exited already, as a cause, or null. */
    private Throwable deadWorkerNow() {
        for (DeviceNode node : nodes.values()) {
            if (node instanceof WorkerProcess w && !w.isAlive()) {
                return new WorkerDiedException(w.device(), w.pid(), w.exitStatusNow(), null);
            }
        }
        return null;
    }

    private void workerDied(WorkerProcess dead, WorkerDiedException death) {
        synchronized (deathLock) {
            handleDeath(dead, death);
        }
    }

    private void handleDeath(WorkerProcess dead, WorkerDiedException death) {
        if (brokenBy == null) {
            brokenBy = death;
            if (!closing) {
                LOG.log(System.Logger.Level.ERROR, death.getMessage() + "; failing every pending operator and stopping the other workers");
            }
            constructor.close("broken: " + death.getMessage());
        }
        dead.markDead(death);
        for (Operator op : graph.pendingInOrder()) {
            op.spec().abandon(brokenBy);
        }
        for (DeviceNode node : nodes.values()) {
            if (node != dead && node instanceof WorkerProcess w && w.isAlive()) {
                w.cancel(brokenBy);
                w.stop();
            }
        }
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        closing = true;
        constructor.close("closed");
        boolean processes = options.perDevicePerProcess();
        try {
            Deadline drain = Deadline.after(options.shutdownTimeout());
            if (!controller.shutdown(options.shutdownTimeout()) && processes) {
                // The controller is stuck, most likely writing to a worker that stopped reading (a hung kernel):
                // stop the workers, which breaks the write, rather than wait on it for ever.
                LOG.log(System.Logger.Level.WARNING, "the controller did not drain within " + options.shutdownTimeout()
                    + "; killing the worker processes");
                killWorkers();
            }
            while (graph.size() > 0 && !drain.expired() && brokenBy == null) {
                synchronized (this) {
                    wait(1);
                }
            }
            boolean cancelled = graph.size() > 0;
            if (cancelled) {
                CommException cause = new CommException("the runtime was closed before this operator ran ("
                    + graph.size() + " operators were still pending after " + Deadline.format(options.shutdownTimeout()) + ")");
                nodes.values().forEach(n -> n.cancel(cause));
                if (processes) {
                    for (Operator op : graph.pendingInOrder()) {
                        op.spec().abandon(brokenBy != null ? brokenBy : cause);
                    }
                } else {
                    groups.abort(cause.getMessage());
                }
            }
            nodes.values().forEach(DeviceNode::stop);
            awaitNodes(cancelled);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            if (processes) {
                killWorkers();
            }
        } finally {
            if (processes) {
                killWorkers();
                failureTimer.shutdownNow();
                encoder.releaseAll();
                SharedFailureBoard board = (SharedFailureBoard) failures;
                board.unlink();
                board.close();
                try {
                    SharedRegion.unlinkAll(SharedRegion.PREFIX + instanceId + "-"); // what a killed worker's stores left
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "cannot remove the shared memory of runtime " + instanceId + ": " + e);
                }
            }
            groups.close();
        }
    }

    /**
     * Waits, at most {@link #TEARDOWN_GRACE}, for every device to stop. In thread mode, devices blocked in a
     * collective are freed by aborting the groups their idle peers hold (again on every pass, as each freed
     * rank frees others); a thread still running after the grace (a kernel that ignores interrupts) is left
     * behind with a warning. In process mode, a worker still alive after the grace is killed.
     */
    private void awaitNodes(boolean cancelled) throws InterruptedException {
        Deadline grace = Deadline.after(TEARDOWN_GRACE);
        List<DeviceNode> running = new ArrayList<>(nodes.values());
        while (!running.isEmpty() && !grace.expired()) {
            Duration slice = Duration.ofNanos(Math.max(1, Math.min(grace.remainingNanos(), ABORT_PASS.toNanos())));
            if (running.getFirst().join(slice)) {
                running.removeFirst();
                continue;
            }
            if (cancelled && !options.perDevicePerProcess()) {
                groups.abort("the runtime is closing");
            }
        }
        for (Map.Entry<Long, DeviceNode> entry : nodes.entrySet()) {
            if (running.contains(entry.getValue())) {
                LOG.log(System.Logger.Level.WARNING, "device " + entry.getKey() + " did not stop within "
                    + Deadline.format(TEARDOWN_GRACE) + (options.perDevicePerProcess() ? "; killing its worker process"
                    : "; its thread is left to finish the kernel it is in"));
            }
        }
        if (options.perDevicePerProcess() && !running.isEmpty()) {
            killWorkers();
            for (DeviceNode node : running) {
                node.join(Duration.ofSeconds(2));
            }
        }
    }

    /** Kills every worker process still alive (SIGKILL); their deaths are expected and not reported as failures. */
    private void killWorkers() {
        killing = true;
        nodes.values().forEach(n -> ((WorkerProcess) n).destroy());
    }
}
