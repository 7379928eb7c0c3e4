package org.dtorch.core.communication.promise;

import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;

/**
 * The native handles a getter makes while it has nothing else to do, just before it parks or sleeps, so that neither
 * the completer nor the woken getter allocates one between the completion and the getter's return (decision 205): a
 * JavaCPP handle costs a native allocation, an upcall and a registration under a JVM-wide lock, several microseconds
 * on a thread just back from a sleep, while filling a handle made earlier ({@code put}, an {@code at::Tensor}
 * assignment) costs a fraction of one.
 *
 * <p>The result handle is the one {@code get()} returns; it is empty (an undefined tensor) until {@link #referenceTo}
 * fills it. A MEMORY promise also takes a spare from its getter for its own reference to the value: the getter lends it
 * through the promise's {@code spare} slot, the completer takes it with {@code getAndSet(null)}, and whichever of the
 * completer's take and the getter's {@link #close()} comes first owns it; an unused handle is closed by the getter.
 *
 * <p>Not thread-safe: one {@code get()} or {@code waitFor} call's; the spare slot it lends through is atomic.
 */
final class PreparedReference implements AutoCloseable {
    /** The slot a completer takes its own handle from; null for File futures (the completer lives elsewhere). */
    private final AtomicReference<Tensor> completerSpare;
    private Tensor result;
    private Tensor lent;

    /** Prepares only the getter's own result handle. */
    PreparedReference() {
        this(null);
    }

    /** Prepares the result handle and lends {@code completerSpare} a spare for the completer, if not null. */
    PreparedReference(AtomicReference<Tensor> completerSpare) {
        this.completerSpare = completerSpare;
    }

    /** Makes the handles; called once, right before the first park or sleep. */
    void beforeSleep() {
        if (result == null) {
            result = new Tensor();
        }
        if (completerSpare != null && lent == null) {
            Tensor spare = new Tensor();
            if (completerSpare.compareAndSet(null, spare)) {
                lent = spare;
            } else {
                spare.close(); // another getter lent one already
            }
        }
    }

    /** A new reference to {@code value} the caller owns: the prepared handle, filled, or a new one if none was made. */
    Tensor referenceTo(Tensor value) {
        Tensor prepared = result;
        if (prepared == null) {
            return new Tensor(value);
        }
        result = null;
        prepared.put(value);
        return prepared;
    }

    /**
     * A handle for a completer's own reference to {@code value}: the spare a getter lent, filled, or a new one.
     * The caller owns it.
     */
    static Tensor takeSpareFor(AtomicReference<Tensor> spareSlot, Tensor value) {
        Tensor spare = spareSlot.getAndSet(null);
        if (spare == null) {
            return new Tensor(value);
        }
        spare.put(value);
        return spare;
    }

    /** Closes the result handle if it was not returned, and the spare if the completer did not take it. */
    @Override
    public void close() {
        if (result != null) {
            result.close();
            result = null;
        }
        if (lent != null) {
            if (completerSpare.compareAndSet(lent, null)) {
                lent.close();
            }
            lent = null;
        }
    }
}
