package org.dtorch.core.runtime;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.device.Nvtx;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.PipelineStages;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.StreamTimeline;
import org.dtorch.core.trace.Tracer;

/**
 * Runs operators on one device (DTorch's {@code NaiveRunner}): builds the operator's kernel, binds its
 * inputs from the blob table, runs it on the device's {@link KernelStream}, and stores its outputs.
 *
 * <p>Failures: if an input failed (here or on a peer), the operator's outputs are recorded as failed
 * before anything else; a communicating kernel still runs, on placeholder zeros, so that its peers are not
 * left waiting in a collective. A kernel that throws fails its outputs with the operator and device named.
 * System kernels complete their promises with the failure.
 *
 * <p>A kernel may return before its communication is done ({@link DeviceKernel#issue}): its outputs are stored, and
 * their completion runs ({@link PendingOutputs}) before the next operator that reads one, a release of one, a sync or
 * a memory query, or the worker's shutdown; the device runs later operators meanwhile. A completion that fails fails the
 * outputs, so every dependent operator and future sees the failure as if the kernel had thrown.
 *
 * <p>Not thread-safe: owned by one worker thread.
 */
final class NaiveRunner {
    private static final System.Logger LOG = System.getLogger(NaiveRunner.class.getName());
    private final Device device;
    private final long deviceId;
    private final KernelStream stream;
    private final BlobTable blobs = new BlobTable();
    /** Outputs whose kernels' communication still runs in the background: awaited where they are read or released. */
    private final PendingOutputs pending;
    private final DeviceMemory memory;
    private final FailureRegistry failures;
    private final ThreadGroupManager groups;
    private final Duration timeout;

    /** The context of kernels that do not communicate: they need no store namespace of their own. */
    private final KernelContext localContext;

    /**
     * A runner for logical device {@code device}, whose kernels run on {@code physical} (the same device except
     * for several ranks on one GPU, see {@link RuntimeOptions#physicalDevice}).
     */
    NaiveRunner(Device device, Device physical, FailureRegistry failures, ThreadGroupManager groups, Duration timeout,
                MemoryWatch watch) {
        this.device = device;
        this.memory = new DeviceMemory(device, physical, blobs, watch);
        this.deviceId = device.index();
        this.stream = new KernelStream(physical);
        this.failures = failures;
        this.groups = groups;
        this.timeout = timeout;
        this.localContext = new KernelContext(device, stream.stream(), groups, "local-" + device.index(), timeout);
        this.pending = new PendingOutputs((op, awaitedFor, cause) -> OperatorFailedException.completionFailed(op, device, awaitedFor, cause),
            this::failOutputs);
    }

    /** Whether to time kernels for {@link PipelineStages}: the loop sets it once per batch of work. */
    private boolean timeKernels;
    /** The device time of traced kernels on CUDA ({@link #bindToThisThread}); null on CPU. */
    private StreamTimeline timeline;
    /** The device time of the collectives they run, bound to the worker's thread for {@code ThreadGroup}; null on CPU. */
    private StreamTimeline collectives;

    /**
     * Binds the device's stream and its {@link DeviceMemory} to the calling thread: the worker thread calls it once,
     * before the first operator, after naming its trace row (the stream's timeline goes to that row).
     */
    void bindToThisThread() {
        stream.bindToThisThread();
        memory.bindToThisThread();
        DeviceStream kernels = stream.stream();
        if (kernels.device().kind() == DeviceKind.CUDA) {
            String name = kernels.device() + " stream";
            timeline = new StreamTimeline(() -> new TimedEventPair(kernels), deviceId, name, StreamTimeline.Subject.KERNELS);
            collectives = new StreamTimeline(() -> new TimedEventPair(kernels), deviceId, name, StreamTimeline.Subject.COLLECTIVES);
            StreamTimeline.bindCollectivesToThisThread(collectives);
        }
    }

    /** Times the kernels of the operators that follow for {@link PipelineStages}, or stops timing them. */
    void timeKernels(boolean on) {
        timeKernels = on;
    }

    private KernelContext context(Operator op) {
        return new KernelContext(device, stream.stream(), groups, "op" + op.id(), timeout);
    }

    /**
     * Runs {@code op}, or fails it without running when {@code cancelledBy} is not null. Never throws: whatever
     * escapes fails the operator's outputs and its promise, so that nobody waits for it until a timeout.
     */
    void execute(Operator op, Throwable cancelledBy) {
        try {
            if (cancelledBy != null) {
                cancel(op, cancelledBy);
            } else {
                run(op);
            }
        } catch (Throwable e) {
            OperatorFailedException cause = OperatorFailedException.kernelFailed(op, device, e);
            LOG.log(System.Logger.Level.ERROR, cause.getMessage(), e);
            failOutputs(op, cause);
            op.spec().abandon(cause);
        }
    }

    private void run(Operator op) {
        if (!pending.isEmpty()) {
            awaitInputs(op);
        }
        boolean communicates = op.spec().communicates();
        KernelContext ctx = communicates ? context(op) : localContext;
        DeviceKernel kernel;
        try {
            kernel = op.spec().kernel(op, deviceId);
        } catch (RuntimeException e) {
            failOutputs(op, OperatorFailedException.kernelFailed(op, device, e));
            return;
        }
        Throwable upstream = upstreamFailure(op);
        if (upstream != null) {
            failOutputs(op, upstream);
            if (communicates) {
                runOnPlaceholders(op, kernel, ctx);
            }
            report(op, kernel, ctx, upstream);
            return;
        }
        List<Tensor> inputs = localInputs(op);
        List<Tensor> outputs;
        Runnable completion;
        try {
            long started = timeKernels ? System.nanoTime() : 0;
            DeviceKernel.Issued issued = runTraced(op, kernel, ctx, inputs);
            outputs = issued.outputs();
            completion = issued.completion();
            if (timeKernels) {
                PipelineStages.add(PipelineStages.Stage.KERNEL, System.nanoTime() - started, 1);
            }
        } catch (Throwable e) {
            OperatorFailedException cause = OperatorFailedException.kernelFailed(op, device, e);
            failOutputs(op, cause);
            report(op, kernel, ctx, cause);
            return;
        }
        Throwable late = peerFailure(op);
        if (late == null && communicates) {
            late = failures.remoteFailure(op);
        }
        if (late != null) {
            completeQuietly(completion); // the background communication writes into the outputs until it is done
            closeNew(outputs, inputs);
            failOutputs(op, late);
            report(op, kernel, ctx, late);
            return;
        }
        store(op, outputs, inputs);
        if (completion != null) {
            pending.add(op, completion, heldOutputIds(op));
        }
    }

    /**
     * Completes what {@code op} reads before it runs: the operators that made its inputs (an in-place operator's
     * written inputs among them), or everything pending before a sync or a memory query, which stand for all the work
     * queued before them.
     */
    private void awaitInputs(Operator op) {
        if (op.inputs().isEmpty() && op.spec() instanceof PromiseSpec) {
            pending.awaitAll(op.label() + " on " + device);
            return;
        }
        for (int i = 0, n = op.inputs().size(); i < n; i++) {
            long id = op.inputId(i);
            if (pending.isPending(id)) {
                pending.awaitFor(id, "input %" + id + " of " + op.label() + " on " + device);
            }
        }
    }

    private long[] heldOutputIds(Operator op) {
        List<Operand> operands = op.outputs();
        long[] ids = new long[operands.size()];
        int n = 0;
        for (int i = 0; i < ids.length; i++) {
            if (blobs.get(op.outputId(i)) != null) {
                ids[n++] = op.outputId(i);
            }
        }
        return Arrays.copyOf(ids, n);
    }

    private static void completeQuietly(Runnable completion) {
        if (completion == null) {
            return;
        }
        try {
            completion.run();
        } catch (RuntimeException ignored) {
            // the operator fails with the error that stopped it
        }
    }

    /**
     * Runs {@code kernel}, traced as one span whether it returns or throws ({@link Tracer#kernel}: host time); on CUDA
     * also {@link #runTracedOnCuda}.
     */
    private DeviceKernel.Issued runTraced(Operator op, DeviceKernel kernel, KernelContext ctx, List<Tensor> inputs) {
        long traced = Tracer.now();
        if (traced != 0 && timeline != null) {
            return runTracedOnCuda(op, kernel, ctx, inputs, traced);
        }
        try {
            return kernel.issue(ctx, inputs);
        } finally {
            Tracer.kernel(op.id(), op.spec().name(), deviceId, traced);
        }
    }

    /**
     * {@link #runTraced} on a CUDA device: the kernel is also an NVTX range, and its device time a span of the stream's
     * timeline (timed events on the stream, reported once they complete, so that nothing waits for the GPU).
     */
    private DeviceKernel.Issued runTracedOnCuda(Operator op, DeviceKernel kernel, KernelContext ctx, List<Tensor> inputs, long traced) {
        String name = op.spec().name();
        Nvtx.rangePush(name);
        StreamTimeline.Span span = timeline.begin(traced);
        try {
            return kernel.issue(ctx, inputs);
        } finally {
            try {
                timeline.end(span, op.id(), name);
            } finally {
                Nvtx.rangePop();
                Tracer.kernel(op.id(), name, deviceId, traced);
            }
        }
    }

    /** The runtime is closing: fails the operator without running it. */
    private void cancel(Operator op, Throwable cause) {
        failOutputs(op, cause);
        DeviceKernel kernel;
        try {
            kernel = op.spec().kernel(op, device.index());
        } catch (RuntimeException e) {
            op.spec().abandon(cause); // no kernel to tell: fail the operator's promise, if it has one, directly
            return;
        }
        report(op, kernel, context(op), cause);
    }

    void release(long operandId) {
        if (pending.isPending(operandId)) {
            pending.awaitFor(operandId, "the release of %" + operandId + " on " + device);
        }
        blobs.release(operandId);
    }

    int liveBlobs() {
        return blobs.size();
    }

    /** Frees the device's tensors, and reports and destroys the stream timelines' events: the worker's last call. */
    void clear() {
        pending.awaitAll("the shutdown of the worker of " + device);
        blobs.clear();
        if (timeline != null) {
            StreamTimeline.bindCollectivesToThisThread(null);
            timeline.close();
            collectives.close();
        }
    }

    private Throwable upstreamFailure(Operator op) {
        if (!blobs.anyFailure() && !failures.anyFailure()) {
            return null;
        }
        for (Operand input : op.inputs()) {
            Throwable local = blobs.failure(input.id());
            if (local != null) {
                return local;
            }
            Throwable anywhere = failures.failure(input.id());
            if (anywhere != null) {
                return anywhere;
            }
        }
        return null;
    }

    /** A failure a peer recorded while this device ran the operator (inputs or outputs). */
    private Throwable peerFailure(Operator op) {
        if (!failures.anyFailure()) {
            return null;
        }
        Throwable t = upstreamFailure(op);
        if (t != null) {
            return t;
        }
        for (Operand output : op.outputs()) {
            Throwable f = failures.failure(output.id());
            if (f != null) {
                return f;
            }
        }
        return null;
    }

    /** True when every operand of {@code op} lives on one mesh that holds this device: nothing to check per operand. */
    private boolean holdsAll(Operator op) {
        DeviceMesh mesh = op.operandMesh();
        return mesh != null && mesh.contains(deviceId);
    }

    /** The inputs' tensors, read by id from the operator, without touching the operand objects when it can. */
    private List<Tensor> localInputs(Operator op) {
        List<Operand> operands = op.inputs();
        int n = operands.size();
        boolean all = holdsAll(op);
        List<Tensor> inputs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            inputs.add(all || holds(operands.get(i)) ? required(op, op.inputId(i)) : null);
        }
        return inputs;
    }

    private Tensor required(Operator op, long inputId) {
        Tensor t = blobs.get(inputId);
        if (t == null) {
            throw new IllegalStateException("operator " + op.label() + " on " + device + ": input %" + inputId
                + " has no tensor on this device (released or never produced)");
        }
        return t;
    }

    /**
     * Runs a communicating kernel whose inputs failed, on zeros where this device holds no tensor, so that its
     * peers are not left waiting. Nothing it throws (placeholders too large to allocate included) escapes: the
     * outputs are failed already and the caller reports the failure.
     */
    private void runOnPlaceholders(Operator op, DeviceKernel kernel, KernelContext ctx) {
        List<Tensor> placeholders = new ArrayList<>();
        try {
            List<Tensor> inputs = new ArrayList<>();
            for (Operand input : op.inputs()) {
                Tensor t = holds(input) ? blobs.get(input.id()) : null;
                if (t == null && holds(input)) {
                    try (TensorOptions options = TorchTensors.options(input.meta().dtype(), ctx.stream().device())) {
                        t = torch.zeros(input.meta().layout().localShape(device.index()), options);
                    }
                    placeholders.add(t);
                }
                inputs.add(t);
            }
            closeNew(kernel.run(ctx, inputs), inputs);
        } catch (Throwable ignored) {
            // the outputs are failed already; the point was to meet the peers
        } finally {
            placeholders.forEach(Tensor::close);
        }
    }

    private void failOutputs(Operator op, Throwable cause) {
        for (Operand output : op.outputs()) {
            failures.fail(output.id(), cause);
            if (holds(output)) {
                blobs.fail(output.id(), cause);
            }
        }
        List<Integer> written = op.spec().writtenInputs(op);
        if (!written.isEmpty()) {
            List<Operand> inputs = op.inputs();
            for (int i : written) {
                Operand input = inputs.get(i);
                failures.fail(input.id(), cause);
                if (holds(input)) {
                    blobs.fail(input.id(), cause);
                }
            }
        }
    }

    private void store(Operator op, List<Tensor> outputs, List<Tensor> inputs) {
        List<Operand> operands = op.outputs();
        boolean all = holdsAll(op);
        for (int i = 0, n = operands.size(); i < n; i++) {
            Operand output = operands.get(i);
            Tensor t = outputs.get(i);
            if (!all && !holds(output)) {
                if (t != null) {
                    t.close();
                }
                continue;
            }
            if (t == null) {
                failOutputs(op, OperatorFailedException.kernelFailed(op, device,
                    new IllegalStateException("the kernel returned no tensor for output %" + output.id())));
                continue;
            }
            if (inputs.contains(t)) {
                t = new Tensor(t); // an in-place kernel returned its input: keep a reference of our own
            }
            if (!output.meta().layout().isLocalShapeOf(deviceId, t)) {
                IllegalStateException wrongShape = new IllegalStateException("output %" + output.id() + " should be "
                    + java.util.Arrays.toString(output.meta().layout().localShape(deviceId)) + " here, the kernel made "
                    + TorchTensors.describe(t));
                t.close();
                failOutputs(op, OperatorFailedException.kernelFailed(op, device, wrongShape));
                continue;
            }
            blobs.put(op.outputId(i), t);
        }
    }

    private static void closeNew(List<Tensor> outputs, List<Tensor> inputs) {
        if (outputs == null) {
            return;
        }
        for (Tensor t : outputs) {
            if (t != null && !inputs.contains(t)) {
                t.close();
            }
        }
    }

    /**
     * Tells the kernel that the operator failed (system kernels complete their promise with the cause). If
     * that throws, the operator's promise is failed through its spec: a promise left pending would only
     * time out, and then without naming the failure.
     */
    private static void report(Operator op, DeviceKernel kernel, KernelContext ctx, Throwable cause) {
        try {
            kernel.failed(ctx, cause);
        } catch (RuntimeException e) {
            // Most often the promise was completed already and keeps its first result; abandon then does nothing.
            LOG.log(System.Logger.Level.DEBUG, "reporting the failure of " + op.label() + " threw " + e);
            op.spec().abandon(cause);
        }
    }

    private boolean holds(Operand operand) {
        return operand.meta().sharding().mesh().contains(deviceId);
    }
}
