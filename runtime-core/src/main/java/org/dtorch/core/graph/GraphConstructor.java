package org.dtorch.core.graph;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.dtorch.core.trace.Tracer;

/**
 * The client's side of the pipeline: turns a call into an {@link Operator} with inferred outputs and sends
 * it to the controller, returning the output operands at once. It never waits for a kernel.
 *
 * <p>Thread-safe: {@link #add} is meant for the one client thread (program order is the order of calls);
 * {@link #release} may come from any thread, such as a {@link java.lang.ref.Cleaner}.
 */
public final class GraphConstructor {
    private final Consumer<GraphMessage> controller;
    private final AtomicLong operandIds = new AtomicLong();
    private final AtomicLong operatorIds = new AtomicLong();
    /**
     * The operators added since start or the last graph dump, so that a dump after a warm-up and one after a step show
     * the step alone.
     */
    private final GraphHistory history = new GraphHistory(GraphHistory.DEFAULT_CAPACITY);
    private volatile String closedBecause;
    /** The client's last inference, reused when the next operator is the same on the same metadata. */
    private volatile LastInference lastInference;

    /** A constructor that sends every message to {@code controller}. */
    public GraphConstructor(Consumer<GraphMessage> controller) {
        this.controller = Objects.requireNonNull(controller, "controller");
    }

    /**
     * Adds an operator and returns its outputs. Metadata inference runs here, so an input combination the
     * operator cannot take fails in the caller's thread, before anything is queued.
     *
     * @throws IllegalStateException after {@link #close}
     */
    public List<Operand> add(OpSpec spec, List<Operand> inputs) {
        long started = PipelineStages.start();
        long traced = Tracer.now();
        ensureOpen(spec.name());
        List<TensorMeta> metas = new ArrayList<>(inputs.size());
        for (Operand input : inputs) {
            metas.add(Objects.requireNonNull(input, () -> spec.name() + ": an input is null").meta());
        }
        List<TensorMeta> outputMetas = infer(spec, metas);
        List<Operand> outputs = new ArrayList<>(outputMetas.size());
        for (TensorMeta meta : outputMetas) {
            Operand output = new Operand(operandIds.incrementAndGet(), meta);
            output.retain();
            outputs.add(output);
        }
        for (Operand input : inputs) {
            input.retain();
        }
        Operator op = new Operator(operatorIds.incrementAndGet(), spec, inputs, outputs);
        try {
            controller.accept(new GraphMessage.AddOperator(op));
        } catch (RuntimeException rejected) {
            // The operator never entered the graph: undo its hold on the operands.
            inputs.forEach(Operand::releaseUse);
            return rejectedOutputs(outputs, rejected);
        }
        history.record(op);
        PipelineStages.end(PipelineStages.Stage.CLIENT_ADD, started);
        Tracer.enqueue(op.id(), spec.name(), outputMetas, op.devices(), traced);
        return outputs;
    }

    /**
     * {@code spec.inferOutputs(metas)}, or the last result when spec and metadata are the same: inference is a pure
     * function of the two, and a loop applies one spec to operands of one metadata.
     */
    private List<TensorMeta> infer(OpSpec spec, List<TensorMeta> metas) {
        long started = PipelineStages.start();
        LastInference last = lastInference;
        List<TensorMeta> outputs = last == null ? null : last.outputsIfSame(spec, metas);
        if (outputs == null) {
            outputs = List.copyOf(spec.inferOutputs(metas));
            lastInference = new LastInference(spec, metas, outputs);
        }
        PipelineStages.end(PipelineStages.Stage.CLIENT_INFERENCE, started);
        return outputs;
    }

    private static List<Operand> rejectedOutputs(List<Operand> outputs, RuntimeException rejected) {
        outputs.forEach(Operand::releaseUse);
        throw rejected;
    }

    /** Adds an operator with exactly one output and returns it. */
    public Operand addSingle(OpSpec spec, List<Operand> inputs) {
        List<Operand> outputs = add(spec, inputs);
        if (outputs.size() != 1) {
            throw new IllegalStateException(spec.name() + " has " + outputs.size() + " outputs, not one");
        }
        return outputs.getFirst();
    }

    /** The operators added since the runtime started or the last {@link GraphHistory#drain}, for graph dumps. */
    public GraphHistory history() {
        return history;
    }

    /**
     * An operand that views {@code source}'s device tensors under {@code meta}, made without an operator: the caller
     * vouches that every device's local tensor under {@code meta} is the one it holds under {@code source}'s metadata
     * (a move between placements that differ only on mesh dimensions of one device). Released as any client handle
     * ({@link #release}); the tensors stay until the source and all its aliases are released.
     *
     * @throws IllegalStateException after {@link #close}
     * @throws IllegalArgumentException when {@code meta} has another shape, dtype or mesh than {@code source}
     */
    public Operand alias(Operand source, TensorMeta meta) {
        ensureOpen("alias");
        TensorMeta from = source.meta();
        if (!java.util.Arrays.equals(from.shape(), meta.shape()) || from.dtype() != meta.dtype()
            || !from.sharding().mesh().equals(meta.sharding().mesh())) {
            throw new IllegalArgumentException("alias: " + meta + " is not a view of " + source);
        }
        return Operand.alias(meta, source.root());
    }

    /**
     * The client dropped its handle of {@code operand} (an alias's handle is one of its root's). Ignored after
     * {@link #close}.
     */
    public void release(Operand operand) {
        if (closedBecause == null && operand.releaseHandle()) {
            controller.accept(new GraphMessage.ReleaseOperand(operand.root()));
        }
    }

    /** Refuses further operators, naming {@code reason}. */
    public void close(String reason) {
        closedBecause = Objects.requireNonNull(reason);
    }

    /** True until {@link #close}. */
    public boolean isOpen() {
        return closedBecause == null;
    }

    private void ensureOpen(String op) {
        String reason = closedBecause;
        if (reason != null) {
            throw new IllegalStateException(op + ": the runtime is " + reason);
        }
    }
}
