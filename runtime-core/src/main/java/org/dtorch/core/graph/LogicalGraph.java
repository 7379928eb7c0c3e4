package org.dtorch.core.graph;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The operators that have been added and not yet run on all their devices. In eager mode an operator
 * arrives after the operators that produce its inputs, so arrival order (operator id) is a topological
 * order and stays one as operators are added: the order is maintained incrementally at no cost. An
 * operator is dropped once every device has run it, and the operands nobody uses any more are forgotten.
 *
 * <p>Thread-safe: the dispatcher adds, one thread at a time; any thread completes or hands over completed
 * operators; any thread reaps or reads.
 */
public final class LogicalGraph {
    /** How many operators the dispatcher adds between two reaps of {@link #completedLater} ones. */
    private static final int REAP_EVERY = 64;

    /** Keyed by the operator itself (whose hash is its id): no boxed id per operator. */
    private final Set<Operator> pending = ConcurrentHashMap.newKeySet();
    private final Consumer<Operand> forget;
    private final Object ranLock = new Object();
    /** Operators run everywhere and handed over by {@link #completedLater}, not reaped yet; guarded by {@link #ranLock}. */
    private ArrayList<Operator> ran = new ArrayList<>();
    /** The reaper's batch; guarded by {@link #reapLock}. */
    private ArrayList<Operator> reaping = new ArrayList<>();
    private final Object reapLock = new Object();
    /** Adds since the last reap; only the dispatcher (one thread at a time) touches it. */
    private int addsSinceReap;

    /** A graph that calls {@code forget} for every operand that no handle and no pending operator uses. */
    public LogicalGraph(Consumer<Operand> forget) {
        this.forget = forget;
    }

    /**
     * Adds {@code op}; its inputs must come from earlier operators. Called by the dispatcher, one thread at a time;
     * every {@value #REAP_EVERY} operators it also {@link #reap reaps}.
     */
    public void add(Operator op) {
        pending.add(op);
        if (++addsSinceReap >= REAP_EVERY) {
            addsSinceReap = 0;
            reap();
        }
    }

    /**
     * Hands over operators that every device has run, for the dispatcher to drop at its next {@link #reap}: a device
     * thread that calls this once per batch of work leaves the bookkeeping of {@link #completed} (the pending set, the
     * operands' use counts, which the dispatcher's thread also changes) to the thread that dispatches, so that one
     * thread writes those counters.
     */
    public void completedLater(List<Operator> ops) {
        synchronized (ranLock) {
            ran.addAll(ops);
        }
    }

    /** Drops every operator handed over by {@link #completedLater} so far, as {@link #completed} does. */
    public void reap() {
        synchronized (reapLock) {
            ArrayList<Operator> batch = reaping;
            synchronized (ranLock) {
                if (ran.isEmpty()) {
                    return;
                }
                reaping = ran;
                ran = batch;
            }
            for (int i = 0, n = reaping.size(); i < n; i++) {
                completed(reaping.get(i));
            }
            reaping.clear();
        }
    }

    /** Drops {@code op}, which every device has run, and releases its hold on its operands. */
    public void completed(Operator op) {
        pending.remove(op);
        List<Operand> inputs = op.inputs();
        for (int i = 0, n = inputs.size(); i < n; i++) {
            release(inputs.get(i));
        }
        List<Operand> outputs = op.outputs();
        for (int i = 0, n = outputs.size(); i < n; i++) {
            release(outputs.get(i));
        }
    }

    /** Releases the client's hold on {@code operand}. */
    public void clientReleased(Operand operand) {
        release(operand);
    }

    private void release(Operand operand) {
        if (operand.releaseUse()) {
            forget.accept(operand);
        }
    }

    /** The number of operators not yet run everywhere (after a {@link #reap}). */
    public int size() {
        reap();
        return pending.size();
    }

    /** The pending operators in topological order (after a {@link #reap}). */
    public List<Operator> pendingInOrder() {
        reap();
        List<Operator> ops = new ArrayList<>(pending);
        ops.sort(Comparator.comparingLong(Operator::id));
        return ops;
    }
}
