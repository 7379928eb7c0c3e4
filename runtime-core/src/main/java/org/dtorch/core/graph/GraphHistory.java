package org.dtorch.core.graph;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.RedistributionPlan;

/**
 * The operators the client added since the runtime started or since the last {@link #drain}, the latest
 * {@link #capacity} of them: the window of the program that a graph dump ({@link GraphDot}) shows. The bound keeps a
 * program that never dumps in constant memory.
 * The runtime itself drops an operator once it has run, so the dump cannot read the {@link LogicalGraph}.
 *
 * <p>A recorded operator keeps its operands (ids and metadata, no tensors) and its redistribution plans, never its
 * spec, which may hold a client tensor or a promise. Older operators are overwritten, and counted.
 *
 * <p>Thread-safe: the client thread records; any thread may drain.
 */
public final class GraphHistory {
    /** How many operators a window keeps by default: a few training steps of a small model. */
    public static final int DEFAULT_CAPACITY = 4096;

    private final RecordedOperator[] ring;
    /** Operators recorded since the last drain, including those overwritten; guarded by {@code this}. */
    private long recorded;

    /**
     * One operator as the client added it.
     *
     * <p>Thread-safe: immutable (operands are).
     *
     * @param id      the operator's id ({@link Operator#id()})
     * @param name    its name ({@link OpSpec#name()})
     * @param inputs  the operands it reads
     * @param outputs the operands it creates
     * @param mesh    the mesh all its operands live on, or null when they differ
     * @param plans   the redistributions it carries out ({@link OpSpec#redistributions})
     */
    public record RecordedOperator(long id, String name, List<Operand> inputs, List<Operand> outputs, DeviceMesh mesh,
                                   List<RedistributionPlan> plans) {

        /** {@code matmul#3}, as {@link Operator#label()}. */
        public String label() {
            return name + "#" + id;
        }
    }

    /**
     * What a {@link #drain} returns.
     *
     * <p>Thread-safe: immutable.
     *
     * @param operators the operators kept, oldest first (topological order)
     * @param dropped   how many older operators of the window were overwritten
     */
    public record Window(List<RecordedOperator> operators, long dropped) {
    }

    /** A history of the latest {@code capacity} operators. */
    public GraphHistory(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("GraphHistory: capacity must be >= 1, got " + capacity);
        }
        this.ring = new RecordedOperator[capacity];
    }

    /** How many operators a window keeps. */
    public int capacity() {
        return ring.length;
    }

    /** Records {@code op}, which the controller has accepted. */
    void record(Operator op) {
        RecordedOperator entry = new RecordedOperator(op.id(), op.spec().name(), op.inputs(), op.outputs(),
            op.operandMesh(), List.copyOf(op.spec().redistributions(op)));
        synchronized (this) {
            ring[(int) (recorded++ % ring.length)] = entry;
        }
    }

    /** The current window, oldest first; the next window starts empty. */
    public synchronized Window drain() {
        int kept = (int) Math.min(recorded, ring.length);
        List<RecordedOperator> operators = new ArrayList<>(kept);
        for (long i = recorded - kept; i < recorded; i++) {
            int slot = (int) (i % ring.length);
            operators.add(ring[slot]);
            ring[slot] = null;
        }
        Window window = new Window(List.copyOf(operators), recorded - kept);
        recorded = 0;
        return window;
    }
}
