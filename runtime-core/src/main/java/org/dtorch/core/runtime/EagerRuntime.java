package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.communication.promise.VoidFutureCollect;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.GraphMessage;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.shm.ShmJanitor;

/**
 * One runtime: a {@link GraphConstructor} for the client, an {@link EagerGraphExecutor} controller (on the client's
 * thread, or a thread of its own where the fleet's submit may block), and one device node per device, started and
 * supervised by the runtime's {@link DeviceFleet}: worker threads of this JVM ({@link ThreadFleet}, thread mode) or
 * worker JVMs of their own ({@link org.dtorch.core.runtime.process.ProcessFleet}, per-device-process mode). Every fleet runs the same
 * {@link DeviceLoop}, runner and kernels; the runtime never asks which fleet it has, so a new way of running devices
 * is a new fleet and nothing else.
 *
 * <p>Starting removes what dead runtime instances left in the shared-memory and rendezvous directories
 * ({@link ShmJanitor}).
 *
 * <p>{@link #close()} refuses new operators, lets the controller dispatch what was queued, waits up to the
 * shutdown timeout for the devices to run it, cancels the rest (their futures fail, naming the shutdown),
 * stops every device, and lets the fleet free what it owns; the fleet supplies each step's particulars.
 *
 * <p>When a node dies (a worker process is killed), the fleet fails every pending future with an error that names
 * the device, and the runtime refuses new operators ({@link #brokenBy()}).
 *
 * <p>Thread-safe: one client thread builds the graph; {@link #close()} may be called from any thread, once.
 */
public final class EagerRuntime implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(EagerRuntime.class.getName());
    /** How long {@link #close()} waits for the devices to stop once the queued work is done or cancelled. */
    static final Duration TEARDOWN_GRACE = Duration.ofMillis(1500);
    /** How often {@link #close()} unblocks devices again while they are still blocked in collectives. */
    private static final Duration ABORT_PASS = Duration.ofMillis(20);

    private final RuntimeOptions options;
    private final List<Device> devices;
    private final String instanceId;
    private final DeviceFleet fleet;
    private final LogicalGraph graph;
    private final Map<Long, DeviceNode> nodes = new LinkedHashMap<>();
    private final EagerGraphExecutor controller;
    private final GraphConstructor constructor;
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
        this.fleet = DeviceFleet.create(options, devices, instanceId);
        this.graph = new LogicalGraph(operand -> fleet.failures().forget(operand.id()));
        try {
            nodes.putAll(fleet.createNodes(graph, this::broken));
        } catch (RuntimeException e) {
            fleet.release();
            throw e;
        }
        this.controller = new EagerGraphExecutor(graph, nodes, fleet);
        this.constructor = new GraphConstructor(this::accept);
        nodes.values().forEach(DeviceNode::start);
        controller.start();
        fleet.traceNodes(controller::runInOrder);
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
            // GPU is reported here once instead of as every worker's failed start. Across nodes, each node has its own.
            Cuda.requireDevices(options.nodes() != null ? options.nodes().devicesPerNode() : options.deviceCount(), options.sameDevice());
        }
        return new EagerRuntime(options);
    }

    private void accept(GraphMessage message) {
        if (message instanceof GraphMessage.AddOperator add) {
            checkDevices(add.operator());
            fleet.checkRunnable(add.operator());
        }
        controller.accept(message);
    }

    private void checkDevices(Operator op) {
        List<Long> ids = op.devices();
        for (int i = 0, n = ids.size(); i < n; i++) {
            long device = ids.get(i);
            if (device < 0 || device >= devices.size()) {
                throw new IllegalArgumentException(op.label() + ": device " + device + " is not one of this runtime's "
                    + options.deviceKind().shortName() + " devices 0.." + (devices.size() - 1));
            }
        }
        checkMeshKinds(op, op.inputs());
        checkMeshKinds(op, op.outputs());
    }

    private void checkMeshKinds(Operator op, List<Operand> operands) {
        for (int i = 0, n = operands.size(); i < n; i++) {
            checkMeshKind(op, operands.get(i).meta().sharding().mesh());
        }
    }

    /**
     * A mesh of the runtime's kind is fine; in a runtime on CUDA a CPU mesh is the host memory of the same workers
     * (kernels place their outputs on the worker stream's device), where only some operators run; anything else is
     * refused.
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
                + " factories, tensor(), toTorch() and redistribute or copy_ between a cpu and a cuda mesh run;"
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
        return fleet.groups();
    }

    /** The promise type of values produced in this runtime: its fleet's. */
    public TensorPromiseType promiseType() {
        return fleet.promiseType();
    }

    /**
     * A promise for a value device {@code device} produces for the client (its {@code get()} waits up to the runtime's
     * timeout): of {@link #promiseType()}, or a NETWORK one for a device on another node.
     *
     * @param expected the value's shape and dtype when known, or null
     */
    public TensorPromise newPromise(long device, ExpectedValue expected) {
        return fleet.newPromise(device, options.timeout(), expected);
    }

    /** Why the runtime stopped taking operators (a worker died), or null while it is healthy. */
    public Throwable brokenBy() {
        return fleet.brokenBy();
    }

    /** The process ids of the workers, by device, in process mode; empty in thread mode. */
    public Map<Long, Long> workerPids() {
        return fleet.workerPids();
    }

    /**
     * One {@link VoidFuture} per device, done when everything queued to it so far has run, joined; its
     * {@code get()} waits up to the runtime's timeout.
     */
    public VoidFutureCollect syncFuture() {
        List<VoidFuture> futures = new ArrayList<>();
        for (Device device : devices) {
            VoidPromise promise = fleet.newVoidPromise(device.index(), options.timeout());
            futures.add(promise.getFuture());
            constructor.add(PromiseSpec.sync(promise, device.index()), List.of());
        }
        return new VoidFutureCollect(futures, options.timeout());
    }

    /**
     * Tensors the devices hold, over all devices; for leak checks. In process mode, as the workers reported
     * after running everything sent to them so far (this waits for those reports, up to the timeout).
     */
    public int liveBlobCount() {
        fleet.awaitReported(options.timeout());
        return nodes.values().stream().mapToInt(DeviceNode::liveBlobs).sum();
    }

    /**
     * The memory of {@code device} once it ran everything queued to it so far (an operator that runs there); waits
     * up to the runtime's timeout.
     *
     * @throws IllegalArgumentException if the runtime has no such device
     */
    public MemoryStats memoryStats(long device) {
        return queryMemory(device, false);
    }

    /**
     * Starts the peaks of {@link #memoryStats} of {@code device} again from the live values, in order with the work
     * queued before, and returns the statistics after it. The shared-memory and CUDA IPC peaks are the process's:
     * in thread mode this resets them for every device.
     */
    public MemoryStats resetPeakMemoryStats(long device) {
        return queryMemory(device, true);
    }

    private MemoryStats queryMemory(long device, boolean resetPeaks) {
        if (device < 0 || device >= devices.size()) {
            throw new IllegalArgumentException("memory statistics: device " + device + " is not one of this runtime's "
                + options.deviceKind().shortName() + " devices 0.." + (devices.size() - 1));
        }
        TensorPromise promise = fleet.newPromise(device, options.timeout(),
            new ExpectedValue(new long[] {MemoryStats.KEYS.size()}, ScalarType.Long));
        TensorFuture future = promise.getFuture();
        constructor.add(PromiseSpec.memoryStats(promise, device, resetPeaks), List.of());
        try (Tensor values = future.get()) {
            return MemoryStats.of(devices.get((int) device), values);
        }
    }

    /** Operators queued or running; for diagnostics. */
    public int pendingOperatorCount() {
        return graph.size();
    }

    /** Operands recorded as failed and still in use; for diagnostics. */
    public int failedOperandCount() {
        return fleet.failures().size();
    }

    /** The fleet lost a node: refuse new operators; the fleet fails what was pending. */
    private void broken(Throwable cause) {
        GraphConstructor c = constructor;
        if (c != null) {
            c.close("broken: " + cause.getMessage());
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
        fleet.closing();
        constructor.close("closed");
        try {
            Deadline drain = Deadline.after(options.shutdownTimeout());
            if (!controller.shutdown(options.shutdownTimeout())) {
                // The controller is stuck, most likely writing to a node that stopped reading (a hung kernel):
                // stop the nodes, which breaks the write, rather than wait on it for ever.
                LOG.log(System.Logger.Level.WARNING, "the controller did not drain within " + options.shutdownTimeout()
                    + "; stopping the device nodes");
                fleet.forceStop();
            }
            while (graph.size() > 0 && !drain.expired() && fleet.brokenBy() == null) {
                synchronized (this) {
                    wait(1);
                }
            }
            // An operator the controller has not dispatched yet (still queued, or a client's call that raced with the
            // close) fails from here on rather than entering a graph that nobody drains; the graph's own are cancelled next.
            controller.cancelUndispatched(new CommException(FailureKind.CANCELLED, "the runtime was closed before this operator"
                + " reached its devices (the controller had not dispatched it within " + Deadline.format(options.shutdownTimeout()) + ")", null));
            boolean cancelled = graph.size() > 0;
            if (cancelled) {
                fleet.cancel(new CommException(FailureKind.CANCELLED, "the runtime was closed before this operator ran ("
                    + graph.size() + " operators were still pending after " + Deadline.format(options.shutdownTimeout()) + ")", null), graph);
            }
            nodes.values().forEach(DeviceNode::stop);
            awaitNodes(cancelled);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            fleet.forceStop();
        } finally {
            fleet.release();
        }
    }

    /**
     * Waits, at most {@link #TEARDOWN_GRACE}, for every device to stop; after a cancel, the fleet unblocks devices
     * stuck in collectives on every pass. What still runs after the grace goes to {@link DeviceFleet#leftBehind}.
     */
    private void awaitNodes(boolean cancelled) throws InterruptedException {
        Deadline grace = Deadline.after(TEARDOWN_GRACE);
        Map<Long, DeviceNode> running = new LinkedHashMap<>(nodes);
        while (!running.isEmpty() && !grace.expired()) {
            Duration slice = Duration.ofNanos(Math.max(1, Math.min(grace.remainingNanos(), ABORT_PASS.toNanos())));
            Map.Entry<Long, DeviceNode> first = running.entrySet().iterator().next();
            if (first.getValue().join(slice)) {
                running.remove(first.getKey());
                continue;
            }
            if (cancelled) {
                fleet.unblockDevices();
            }
        }
        if (!running.isEmpty()) {
            fleet.leftBehind(running);
        }
    }
}
