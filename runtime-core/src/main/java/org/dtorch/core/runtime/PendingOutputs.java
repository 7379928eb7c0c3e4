package org.dtorch.core.runtime;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.function.BiConsumer;
import org.dtorch.core.graph.Operator;

/**
 * One device's operators whose kernels returned outputs that are not complete yet ({@code DeviceKernel.issue}: an
 * all-reduce that runs in the background), with the completion that finishes them. The outputs are in the device's
 * {@link BlobTable} already; nothing may read, write or release them before their completion ran, so the runner calls
 * {@link #awaitFor} before an operator takes one as input and before a release, and {@link #awaitAll} before a sync
 * or a memory query and at the worker's shutdown. Completions run in the order their operators were issued: awaiting
 * one completes every earlier one first, as the devices issued their collectives in one order.
 *
 * <p>A completion that throws fails its operator's outputs (through the runner's {@code fail}), so that every operator
 * and future that depends on them gets the failure, as when a synchronous kernel throws.
 *
 * <p>Not thread-safe: the device's worker thread.
 */
final class PendingOutputs {
    private record Pending(Operator op, Runnable completion, long[] outputIds) {
    }

    private final LongKeyedMap<Pending> byOperand = new LongKeyedMap<>();
    private final ArrayDeque<Pending> inOrder = new ArrayDeque<>();
    /** Fails an operator's outputs with the given cause: the runner's own bookkeeping. */
    private final BiConsumer<Operator, RuntimeException> fail;
    private final Failure failure;

    /** Builds the error of a completion that threw, naming the operator and what waited for it. */
    @FunctionalInterface
    interface Failure {
        RuntimeException of(Operator op, String awaitedFor, Throwable cause);
    }

    PendingOutputs(Failure failure, BiConsumer<Operator, RuntimeException> fail) {
        this.failure = failure;
        this.fail = fail;
    }

    /** Records that the outputs {@code outputIds} of {@code op} hold their values once {@code completion} ran. */
    void add(Operator op, Runnable completion, long[] outputIds) {
        Pending p = new Pending(op, completion, outputIds.clone());
        inOrder.addLast(p);
        for (long id : outputIds) {
            byOperand.put(id, p);
        }
    }

    boolean isEmpty() {
        return inOrder.isEmpty();
    }

    /** True while operand {@code operandId} waits for its completion. */
    boolean isPending(long operandId) {
        return !inOrder.isEmpty() && byOperand.get(operandId) != null;
    }

    /**
     * Completes the operator that made {@code operandId}, after every operator issued before it; nothing when the
     * operand is complete. {@code awaitedFor} names the reader in a failure.
     */
    void awaitFor(long operandId, String awaitedFor) {
        if (inOrder.isEmpty()) {
            return;
        }
        Pending target = byOperand.get(operandId);
        if (target == null) {
            return;
        }
        while (!inOrder.isEmpty()) {
            Pending p = inOrder.peekFirst();
            complete(p, awaitedFor);
            if (p == target) {
                return;
            }
        }
    }

    /** Completes every pending operator, in the order they were issued. */
    void awaitAll(String awaitedFor) {
        while (!inOrder.isEmpty()) {
            complete(inOrder.peekFirst(), awaitedFor);
        }
    }

    private void complete(Pending p, String awaitedFor) {
        inOrder.removeFirst();
        for (long id : p.outputIds()) {
            byOperand.remove(id);
        }
        try {
            p.completion().run();
        } catch (RuntimeException e) {
            fail.accept(p.op(), failure.of(p.op(), awaitedFor + " (outputs " + Arrays.toString(p.outputIds()) + " of "
                + p.op().label() + ")", e));
        }
    }
}
