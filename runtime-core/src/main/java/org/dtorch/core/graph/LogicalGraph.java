package org.dtorch.core.graph;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The operators that have been added and not yet run on all their devices. In eager mode an operator
 * arrives after the operators that produce its inputs, so arrival order (operator id) is a topological
 * order and stays one as operators are added: the order is maintained incrementally at no cost. An
 * operator is dropped once every device has run it, and the operands nobody uses any more are forgotten.
 *
 * <p>Thread-safe: the controller adds, any device thread completes.
 */
public final class LogicalGraph {
    private final Map<Long, Operator> pending = new ConcurrentHashMap<>();
    private final Consumer<Operand> forget;

    /** A graph that calls {@code forget} for every operand that no handle and no pending operator uses. */
    public LogicalGraph(Consumer<Operand> forget) {
        this.forget = forget;
    }

    /** Adds {@code op}; its inputs must come from earlier operators. */
    public void add(Operator op) {
        pending.put(op.id(), op);
    }

    /** Drops {@code op}, which every device has run, and releases its hold on its operands. */
    public void completed(Operator op) {
        pending.remove(op.id());
        for (Operand o : op.inputs()) {
            release(o);
        }
        for (Operand o : op.outputs()) {
            release(o);
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

    /** The number of operators not yet run everywhere. */
    public int size() {
        return pending.size();
    }

    /** The pending operators in topological order. */
    public List<Operator> pendingInOrder() {
        List<Operator> ops = new ArrayList<>(pending.values());
        ops.sort(Comparator.comparingLong(Operator::id));
        return ops;
    }
}
