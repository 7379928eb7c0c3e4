package org.dtorch.core.communication.group;

import java.util.function.Consumer;

/**
 * The handle of an issued {@link ThreadGroup#allReduceSumAsync_}: {@link #await()} returns once every tensor holds its
 * sum over the ranks, or fails within the group's timeout with an error that names the group, the rank and the
 * tensors. The tensors are the reduction's until then: neither read, written nor closed.
 *
 * <p>Not thread-safe: the rank's thread that issued the reduction awaits it.
 */
public final class ReductionWork {
    private final Consumer<Runnable> named;
    private final Runnable completion;
    private final String what;
    private boolean done;
    private RuntimeException failure;

    /** {@code completion} finishes the reduction of {@code what}; {@code named} runs it with the group's error context. */
    ReductionWork(Consumer<Runnable> named, Runnable completion, String what) {
        this.named = named;
        this.completion = completion;
        this.what = what;
    }

    /** A reduction that is complete already (one rank, or a backend that reduced at once). */
    static ReductionWork completed(String what) {
        ReductionWork work = new ReductionWork(Runnable::run, () -> { }, what);
        work.done = true;
        return work;
    }

    /**
     * Blocks until the sums are in the tensors; bounded by the group's timeout. Later calls return, or rethrow the
     * failure. The buffers and c10d's work are released whether it succeeds or not.
     */
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

    /** What is reduced: the group, the rank, the tensors' count and bytes. */
    public String describe() {
        return what;
    }

    @Override
    public String toString() {
        return "ReductionWork{" + what + (done ? ", done" : failure != null ? ", failed" : ", in flight") + "}";
    }
}
