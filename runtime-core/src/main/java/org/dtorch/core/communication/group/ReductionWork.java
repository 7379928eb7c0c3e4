package org.dtorch.core.communication.group;

import java.util.function.Consumer;

/**
 * The handle of an issued {@link ThreadGroup#allReduceSumAsync_}: {@link #await()} returns once every tensor holds its
 * sum over the ranks, or fails within the group's timeout with an error that names the group, the rank and the
 * tensors. The tensors are the reduction's until then: neither read, written nor closed.
 *
 * <p>Not thread-safe: the rank's thread that issued the reduction awaits it.
 */
public final class ReductionWork extends IssuedWork {
    private final String what;

    /** {@code completion} finishes the reduction of {@code what}; {@code named} runs it with the group's error context. */
    ReductionWork(Consumer<Runnable> named, Runnable completion, String what) {
        super(named, completion);
        this.what = what;
    }

    /** A reduction that is complete already (one rank, or a backend that reduced at once). */
    static ReductionWork completed(String what) {
        ReductionWork work = new ReductionWork(Runnable::run, () -> { }, what);
        work.markDone();
        return work;
    }

    /** What is reduced: the group, the rank, the tensors' count and bytes. */
    public String describe() {
        return what;
    }

    @Override
    public String toString() {
        return "ReductionWork{" + what + ", " + state() + "}";
    }
}
