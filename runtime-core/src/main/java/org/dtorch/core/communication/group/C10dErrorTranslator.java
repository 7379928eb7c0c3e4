package org.dtorch.core.communication.group;

import java.time.Duration;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.store.RendezvousAddress;

/**
 * Turns the failures of one rank's c10d calls into {@link CommException}s, and names the group in them. It is the one
 * place native c10d errors are classified, so that every layer above reads the kind instead of guessing it again.
 *
 * <p>JavaCPP turns every C++ exception into a plain {@link RuntimeException} carrying only {@code what()}, so the kind
 * is decided by the clock, not by the words of the message: a call that failed after its whole timeout had passed since
 * it was issued is {@link FailureKind#TIMEOUT} (c10d starts its own timer later than the caller's start, so its timeout
 * always fires past that point), anything sooner is {@link FailureKind#COMMUNICATION}. The message keeps the first line
 * of c10d's text, without its source-file prefix.
 *
 * <p>Thread-safe: immutable.
 */
final class C10dErrorTranslator {
    /** The operation name of joining the group; its failures name the group first. */
    static final String CONNECT = "connect";

    private final String backendName;
    private final String described;
    private final Duration timeout;

    /**
     * The translator of rank {@code rank} of {@code size} in group {@code groupName} on {@code backendName} ({@code gloo}
     * or {@code nccl}), whose ranks met at {@code rendezvous} (null for a FileStore) and whose calls time out after
     * {@code timeout}.
     */
    C10dErrorTranslator(String backendName, String groupName, int rank, int size, RendezvousAddress rendezvous, Duration timeout) {
        this.backendName = backendName;
        this.timeout = timeout;
        this.described = "group " + groupName + " (rank " + rank + " of " + size + ", " + backendName
            + (rendezvous == null ? "" : " over the rendezvous " + rendezvous) + ")";
    }

    /** {@code gloo} or {@code nccl}. */
    String backendName() {
        return backendName;
    }

    /** The group as errors name it: its name, this rank, the size, the backend and where the ranks met. */
    String described() {
        return described;
    }

    /** The failure {@code e} of {@code op}, issued at {@code startNanos}, waiting for the other ranks. */
    CommException translate(String op, RuntimeException e, long startNanos) {
        return translate(op, null, e, startNanos);
    }

    /**
     * The failure {@code e} of {@code op}, issued at {@code startNanos} ({@link System#nanoTime}), while waiting for
     * {@code waitingFor} (a step of a ring, say), or for the other ranks when it is null.
     */
    CommException translate(String op, String waitingFor, RuntimeException e, long startNanos) {
        String message = String.valueOf(e.getMessage());
        int firstLine = message.indexOf('\n');
        // Drop the "[/path/to/source.cc:78] " prefix of c10 errors.
        String c10dMessage = (firstLine < 0 ? message : message.substring(0, firstLine)).replaceFirst("^\\[[^\\]]*\\]\\s*", "");
        String prefix = op.equals(CONNECT) ? "connect to " + described + ": " : "";
        long waitedNanos = System.nanoTime() - startNanos;
        if (waitedNanos >= Duration.ofMillis(timeout.toMillis()).toNanos()) {
            return new CommTimeoutException(prefix + Deadline.after(timeout).timedOutAfter()
                + " waiting for " + (waitingFor == null ? "the other ranks" : waitingFor) + " (" + backendName + ": " + c10dMessage + ")", e);
        }
        return new CommException(FailureKind.COMMUNICATION, prefix + backendName + " failed"
            + (waitingFor == null ? "" : " in " + waitingFor) + ": " + c10dMessage, e);
    }
}
