package org.dtorch.core.communication.group;

import java.util.function.Consumer;

/**
 * The one handle of a {@link ThreadGroup#batchIsendIrecv} batch: {@link #await()} returns once every send of the batch
 * was taken by its peer and every receive landed in its tensor, or fails within the group's timeout naming the batch.
 * On CUDA the received values are ordered with the rank's stream, as the collectives' results are.
 *
 * <p>Not thread-safe: the rank's thread that issued the batch awaits it.
 */
public final class P2PWork extends IssuedWork {
    /** {@code completion} finishes the batch; {@code named} runs it with the group's error context. */
    P2PWork(Consumer<Runnable> named, Runnable completion) {
        super(named, completion);
    }
}
