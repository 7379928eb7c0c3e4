package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.AutoDispatchBelowADInplaceOrView;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.PipelineStages;
import org.dtorch.core.trace.Tracer;

/**
 * The run loop of one device, the same whether the device is a thread of the controller's JVM
 * ({@link PerDeviceThreadNodeRunner}) or a worker process of its own
 * ({@link org.dtorch.core.runtime.process.WorkerMain}): it takes operators and releases in the order the controller
 * sent them, runs each with the device's {@link NaiveRunner}, and tells its {@link Listener} what ran and when it
 * caught up. Devices receive operators in the same global order, so their collectives meet.
 *
 * <p>It takes everything queued in one go and works through the batch ({@link WorkQueue}), so the queue's lock moves
 * between cores once per batch, not once per operator.
 *
 * <p>A cancel fails every operator not yet run instead of running it, and interrupts a wait in progress; a
 * {@link #stopWith fatal stop} ends the loop before anything queued after it runs.
 *
 * <p>Thread-safe: {@link #submit}, {@link #submitRelease}, {@link #submitTask}, {@link #stop}, {@link #stopWith} and {@link #cancel} from
 * any thread; {@link #run} on the device's own thread, once.
 */
public final class DeviceLoop {
    private static final System.Logger LOG = System.getLogger(DeviceLoop.class.getName());
    private static final Object STOP = new Object();

    private record Release(long operandId) {
    }

    private record Fatal(RuntimeException error) {
    }

    /**
     * What the owner of a loop hears, on the device's thread.
     *
     * <p>Not thread-safe: called by the loop's thread only.
     */
    public interface Listener {

        /** {@code op} ran on this device (or failed; its outputs and promise say so). */
        void ran(Operator op);

        /** The loop worked through one batch of what was queued (a listener that collects what ran hands it on here). */
        default void batchDone() {
        }

        /** How long the loop waits for more work before it calls {@link #caughtUp}; 0 calls it at once. */
        default long lingerNanos() {
            return 0;
        }

        /** Nothing is queued: the loop is about to wait for the controller. */
        default void caughtUp() {
        }
    }

    private final Device device;
    private final WorkQueue<Object> inbox = new WorkQueue<>();
    private final NaiveRunner runner;
    private volatile Throwable cancelledBy;
    private volatile Thread thread;

    /**
     * The loop of logical device {@code device}, whose kernels run on {@code physical}
     * ({@link RuntimeOptions#physicalDevice}), watching its memory at syncs as {@code watch} says.
     */
    public DeviceLoop(Device device, Device physical, FailureRegistry failures, ThreadGroupManager groups, Duration timeout,
                      MemoryWatch watch) {
        this.device = device;
        this.runner = new NaiveRunner(device, physical, failures, groups, timeout, watch);
    }

    /** Queues {@code op}. */
    public void submit(Operator op) {
        inbox.offer(op);
    }

    /** Queues the release of this device's tensor of operand {@code operandId}. */
    public void submitRelease(long operandId) {
        inbox.offer(new Release(operandId));
    }

    /** Queues the release of this device's tensor of {@code operand}; the operand itself is the message. */
    public void submitRelease(Operand operand) {
        inbox.offer(operand);
    }

    /** Runs {@code task} on the device's thread once everything queued before has been handled (or cancelled). */
    public void submitTask(Runnable task) {
        inbox.offer(task);
    }

    /** The loop ends once everything queued before has been handled. */
    public void stop() {
        inbox.offer(STOP);
    }

    /** Cancels what is queued and ends the loop, which returns {@code error}; nothing queued after it runs. */
    public void stopWith(RuntimeException error) {
        inbox.offer(new Fatal(error));
        cancel(error);
    }

    /** Fails every operator not yet run instead of running it, and interrupts a wait in progress. */
    public void cancel(Throwable cause) {
        cancelledBy = cause;
        Thread t = thread;
        if (t != null) {
            t.interrupt();
        }
    }

    /** The tensors the device holds. */
    public int liveBlobs() {
        return runner.liveBlobs();
    }

    /**
     * Runs on the calling thread until {@link #stop} (null) or {@link #stopWith} (its error); frees the device's
     * tensors on the way out, and returns with the thread's interrupt status clear (a cancel's interrupt is the loop's).
     */
    public RuntimeException run(Listener listener) {
        // A cancel that came before this line finds no thread to interrupt; its cause is read before every operator.
        thread = Thread.currentThread();
        Tracer.nameThisThread(device.index() + 1, "device " + device);
        // The workers run libtorch's kernels below its autograd: the distributed tape differentiates on the controller,
        // so a worker never records a graph, and skipping the autograd and view-tracking layers shortens each dispatch.
        // A thread-local switch, restored before the thread leaves the loop.
        AutoDispatchBelowADInplaceOrView belowAutograd = new AutoDispatchBelowADInplaceOrView();
        try {
            runner.bindToThisThread();
            while (true) {
                List<Object> tasks = inbox.poll();
                if (tasks.isEmpty()) {
                    long linger = listener.lingerNanos();
                    if (linger > 0) {
                        tasks = inbox.take(linger);
                    }
                    if (tasks.isEmpty()) {
                        listener.caughtUp();
                        tasks = inbox.take();
                    }
                }
                if (tasks.isEmpty()) {
                    Thread.interrupted(); // a cancel woke us; queued work fails from now on
                    continue;
                }
                // Whether to time the stages is read once per batch, not per operator.
                boolean timed = PipelineStages.enabled();
                long batchStarted = timed ? System.nanoTime() : 0;
                int operators = 0;
                runner.timeKernels(timed);
                for (int i = 0, n = tasks.size(); i < n; i++) {
                    Object task = tasks.get(i);
                    if (task == STOP) {
                        listener.batchDone();
                        return null;
                    }
                    if (task instanceof Fatal fatal) {
                        listener.batchDone();
                        return fatal.error();
                    }
                    if (handle(task, listener, timed)) {
                        operators++;
                    }
                }
                listener.batchDone();
                if (timed) {
                    PipelineStages.add(PipelineStages.Stage.WORKER_BUSY, System.nanoTime() - batchStarted, operators);
                }
            }
        } finally {
            // A cancel interrupts this thread to wake the loop's own waits; the interrupt must not outlive the loop. Left
            // set, it made the worker's shutdown skip the wait for its writer thread, and the FATAL report of a rejected
            // message could be lost when the socket closed first (WorkerProtocolTest saw it once in a CI run).
            Thread.interrupted();
            runner.clear();
            belowAutograd.close();
        }
    }

    /** Runs or releases {@code task}; true if it was an operator. */
    private boolean handle(Object task, Listener listener, boolean timed) {
        try {
            if (task instanceof Operator op) {
                long started = timed ? System.nanoTime() : 0;
                runner.execute(op, cancelledBy);
                if (timed) {
                    PipelineStages.add(PipelineStages.Stage.WORKER_EXECUTE, System.nanoTime() - started, 1);
                }
                Thread.interrupted(); // a cancel that came while it ran has done its work
                listener.ran(op);
                return true;
            }
            if (task instanceof Runnable action) {
                action.run();
                return false;
            }
            long started = timed ? System.nanoTime() : 0;
            if (task instanceof Operand operand) {
                runner.release(operand.id());
            } else if (task instanceof Release r) {
                runner.release(r.operandId());
            }
            if (timed) {
                PipelineStages.add(PipelineStages.Stage.WORKER_RELEASE, System.nanoTime() - started, 1);
            }
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "device " + device + " failed on " + task, e);
        }
        return false;
    }
}
