package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.process.ProcessFleet;

/**
 * How a runtime's device nodes are started, supervised and stopped: threads of this JVM ({@link ThreadFleet}),
 * one worker process per device on this host or on several nodes ({@link ProcessFleet}). The
 * {@link EagerRuntime} and the {@link EagerGraphExecutor} talk to a fleet and its {@link DeviceNode}s only; they
 * never ask which fleet it is, so a new way of running devices adds a fleet and a line in {@link #create}. A fleet
 * owns:
 *
 * <ul>
 *   <li>starting the nodes ({@link #createNodes}) and the group manager they communicate through;</li>
 *   <li>the {@link FailureRegistry} every node records failures in;</li>
 *   <li>the {@link TensorPromiseType} of the promises that {@code get_tensor} and {@code sync} carry to the nodes;</li>
 *   <li>what happens when a node dies (it fails every pending operator and tells its {@link Owner});</li>
 *   <li>the fleet-specific steps of the teardown, which {@link EagerRuntime#close()} runs in one order for every
 *   fleet: drain, {@link #forceStop} if the controller is stuck, {@link #cancel} what is left, stop the nodes,
 *   {@link #unblockDevices} while waiting for them, {@link #leftBehind} the ones that did not stop, and
 *   {@link #release} last.</li>
 * </ul>
 *
 * <p>Thread-safe: {@link #createNodes} once, from the runtime's constructor; the rest from any thread.
 */
public interface DeviceFleet {

    /**
     * What a fleet tells the runtime that owns it.
     *
     * <p>Thread-safe: called from the fleet's supervision threads.
     */
    interface Owner {
        /** A node died: the runtime refuses new operators from now on; {@code cause} names the node. */
        void broken(Throwable cause);
    }

    /**
     * The fleet {@code options} asks for, not started yet: the one place that maps a mode to its fleet.
     *
     * @param devices    the runtime's devices, ids 0 to n-1
     * @param instanceId the runtime's instance id, which names its shared memory and rendezvous files
     */
    static DeviceFleet create(RuntimeOptions options, List<Device> devices, String instanceId) {
        return options.workerProcesses() ? ProcessFleet.create(options, devices, instanceId)
            : new ThreadFleet(options, devices, instanceId);
    }

    /**
     * Starts one node per device, not yet running ({@link DeviceNode#start}); by device id. On failure nothing is
     * left running, and the caller still calls {@link #release}.
     *
     * @throws CommException if a node cannot start
     */
    Map<Long, DeviceNode> createNodes(LogicalGraph graph, Owner owner);

    /** The group manager of this process (in a fleet of processes it only owns the rendezvous directory). */
    ThreadGroupManager groups();

    /** Where every node records failed operands. */
    FailureRegistry failures();

    /** The promise type of values the nodes produce for the client. */
    TensorPromiseType promiseType();

    /**
     * A promise that node {@code device} completes for the client: of {@link #promiseType()} by default; {@code timeout}
     * is its future's deadline, {@code expected} its value's shape and dtype when known (or null).
     */
    default TensorPromise newPromise(long device, Duration timeout, ExpectedValue expected) {
        return TensorPromises.create(promiseType(), timeout, expected);
    }

    /** A void promise that node {@code device} completes; see {@link #newPromise}. */
    default VoidPromise newVoidPromise(long device, Duration timeout) {
        return TensorPromises.createVoid(promiseType(), timeout);
    }

    /**
     * Refuses, with an {@link IllegalArgumentException} that names the reason, an operator the nodes cannot run (one
     * that cannot cross to a worker process, for example); the default accepts every operator.
     */
    default void checkRunnable(Operator op) {
    }

    /**
     * Whether {@link DeviceNode#submit} may block (a write to a worker process's socket that stopped reading). When
     * true, the default, the controller is a thread of its own, so that a stuck node never stalls the client; when
     * false (submitting only queues in this JVM), the client's thread dispatches each operator itself and the
     * pipeline saves a hand-off (client to worker, instead of client to controller to worker).
     */
    default boolean submitMayBlock() {
        return true;
    }

    /** {@code op} was queued to every node that runs it; the default does nothing. */
    default void dispatched(Operator op) {
    }

    /** Why the fleet stopped taking operators (a node died), or null while it is healthy. */
    Throwable brokenBy();

    /** The process ids of the nodes that are processes, by device; empty for threads. */
    default Map<Long, Long> workerPids() {
        return Map.of();
    }

    /**
     * Waits, up to {@code timeout}, until every node has told the controller about everything sent to it so far,
     * so that {@link DeviceNode#liveBlobs} is current; the default returns at once (a thread's count always is).
     */
    default void awaitReported(Duration timeout) {
    }

    /**
     * Lets the nodes that are processes of their own record this process's trace sessions
     * ({@link org.dtorch.core.trace.Tracer.Remote}) until {@link #release}; {@code inOrder} runs an action on the
     * controller in order with the operators. The default does nothing: threads record into this process's tracer.
     */
    default void traceNodes(Consumer<Runnable> inOrder) {
    }

    /** The runtime started closing: deaths of nodes it stops are expected from now on. */
    void closing();

    /**
     * Stops the nodes the hard way, now (the controller is stuck writing to a node, or the closing thread was
     * interrupted); a no-op where nodes cannot be killed.
     */
    void forceStop();

    /** Fails every operator still pending in {@code graph} with {@code cause}, and interrupts what the nodes wait on. */
    void cancel(CommException cause, LogicalGraph graph);

    /** Called on every pass while the runtime waits for cancelled nodes to stop: frees nodes blocked in collectives. */
    void unblockDevices();

    /** Nodes that did not stop within the teardown grace: warn, and kill what can be killed. */
    void leftBehind(Map<Long, DeviceNode> running) throws InterruptedException;

    /** Frees what the fleet owns (shared memory, rendezvous files, groups); the last step of the teardown. */
    void release();
}
