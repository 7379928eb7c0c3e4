package org.dtorch.core.communication.group;

import java.util.function.Consumer;

/**
 * What the handles of issued communication share ({@link P2PWork}, {@link ReductionWork}): a completion that runs once,
 * with the group's error context, on the first {@link #await()}; later calls return, or rethrow its failure.
 *
 * <p>Not thread-safe: the rank's thread that issued the work awaits it.
 */
abstract class IssuedWork {
    private final Consumer<Runnable> named;
    private final Runnable completion;
    private boolean done;
    private RuntimeException failure;

    /** {@code completion} finishes the work; {@code named} runs it with the group's error context. */
    IssuedWork(Consumer<Runnable> named, Runnable completion) {
        this.named = named;
        this.completion = completion;
    }

    /** Marks the work complete without running anything: it completed where it was issued. */
    final void markDone() {
        done = true;
    }

    /** Blocks until the work is complete; bounded by the group's timeout. Later calls return, or rethrow the failure. */
    public void await() {
        if (failure != null) {
            throw failure;
        }
        if (done) {
            return;
        }
        try {
            named.accept(completion);
            done = true;
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        }
    }

    /** True once {@link #await()} has returned normally. */
    public boolean isDone() {
        return done;
    }

    /** {@code done}, {@code failed} or {@code in flight}, for messages. */
    final String state() {
        return done ? "done" : failure != null ? "failed" : "in flight";
    }
}
