package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.communication.promise.VoidFutureCollect;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.GraphMessage;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operator;

/**
 * One runtime in thread mode: a {@link GraphConstructor} for the client, an {@link EagerGraphExecutor}
 * controller thread, one {@link PerDeviceThreadNodeRunner} worker thread per device, a
 * {@link ThreadGroupManager} for their collectives.
 *
 * <p>{@link #close()} refuses new operators, lets the controller dispatch what was queued, waits up to the
 * shutdown timeout for the workers to run it, cancels the rest (their futures fail, naming the shutdown),
 * stops and joins every thread, drops every tensor and destroys the groups.
 *
 * <p>Thread-safe: one client thread builds the graph; {@link #close()} may be called from any thread, once.
 */
public final class EagerRuntime implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(EagerRuntime.class.getName());

    private final RuntimeOptions options;
    private final List<Device> devices;
    private final ThreadGroupManager groups;
    private final FailureRegistry failures = new FailureRegistry();
    private final LogicalGraph graph;
    private final Map<Long, PerDeviceThreadNodeRunner> runners = new LinkedHashMap<>();
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
        this.groups = new ThreadGroupManager(options.sameDevice(), GlobalCommInstanceId.next(), options.timeout());
        this.graph = new LogicalGraph(operand -> failures.forget(operand.id()));
        for (Device device : devices) {
            runners.put((long) device.index(), new PerDeviceThreadNodeRunner(device, graph, failures, groups, options.timeout()));
        }
        this.controller = new EagerGraphExecutor(graph, runners);
        this.constructor = new GraphConstructor(this::accept);
        runners.values().forEach(PerDeviceThreadNodeRunner::start);
        controller.start();
    }

    /**
     * Starts a runtime.
     *
     * @throws UnsupportedOperationException for per-device-process mode, which is not built yet
     */
    public static EagerRuntime start(RuntimeOptions options) {
        Objects.requireNonNull(options, "options");
        if (options.perDevicePerProcess()) {
            throw new UnsupportedOperationException("per-device-process mode (one worker process per device, File stores and "
                + "promises) is not built yet: it comes with the per-device-process issue; use thread mode");
        }
        if (options.deviceKind() != org.dtorch.core.device.DeviceKind.CPU) {
            throw new UnsupportedOperationException("GPU devices are not built yet: CUDA streams and NCCL come with the GPU issue");
        }
        return new EagerRuntime(options);
    }

    private void accept(GraphMessage message) {
        if (message instanceof GraphMessage.AddOperator add) {
            checkDevices(add.operator());
        }
        controller.accept(message);
    }

    private void checkDevices(Operator op) {
        for (long device : op.devices()) {
            if (!runners.containsKey(device)) {
                throw new IllegalArgumentException(op.label() + ": device " + device + " is not one of this runtime's "
                    + options.deviceKind().shortName() + " devices 0.." + (devices.size() - 1));
            }
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

    /** The runtime's group manager (its collective counter, for instance). */
    public ThreadGroupManager groups() {
        return groups;
    }

    /** The promise type of values produced in this runtime ({@link TensorPromises#typeFor}). */
    public TensorPromiseType promiseType() {
        return TensorPromises.typeFor(options.deviceKind(), options.perDevicePerProcess());
    }

    /** One {@link VoidFuture} per device, done when everything queued to it so far has run, joined. */
    public VoidFutureCollect syncFuture() {
        List<VoidFuture> futures = new ArrayList<>();
        for (Device device : devices) {
            VoidPromise promise = TensorPromises.createVoid(promiseType());
            futures.add(promise.getFuture());
            constructor.add(new SyncSpec(promise, device.index()), List.of());
        }
        return new VoidFutureCollect(futures);
    }

    /** Tensors the workers hold, over all devices; for leak checks. */
    public int liveBlobCount() {
        return runners.values().stream().mapToInt(PerDeviceThreadNodeRunner::liveBlobs).sum();
    }

    /** Operators queued or running; for diagnostics. */
    public int pendingOperatorCount() {
        return graph.size();
    }

    /** Operands recorded as failed and still in use; for diagnostics. */
    public int failedOperandCount() {
        return failures.size();
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        constructor.close("closed");
        try {
            controller.shutdown(options.shutdownTimeout());
            long deadline = System.nanoTime() + options.shutdownTimeout().toNanos();
            while (graph.size() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            if (graph.size() > 0) {
                CommException cancelled = new CommException("the runtime was closed before this operator ran ("
                    + graph.size() + " operators were still pending after " + options.shutdownTimeout() + ")");
                runners.values().forEach(r -> r.cancel(cancelled));
            }
            runners.values().forEach(PerDeviceThreadNodeRunner::stop);
            Duration joinTimeout = options.timeout().plus(options.shutdownTimeout());
            for (Map.Entry<Long, PerDeviceThreadNodeRunner> entry : runners.entrySet()) {
                if (!entry.getValue().join(joinTimeout)) {
                    LOG.log(System.Logger.Level.WARNING, "worker of device " + entry.getKey() + " did not stop within " + joinTimeout);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            groups.close();
        }
    }
}
