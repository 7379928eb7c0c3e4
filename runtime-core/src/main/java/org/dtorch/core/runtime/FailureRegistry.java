package org.dtorch.core.runtime;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which operands failed, and why, for the whole runtime. A device records an operator's outputs as failed
 * before it runs the operator on placeholder data (or as soon as its kernel throws); every device checks
 * the registry after running an operator. Because data only crosses devices inside a communicating
 * kernel, a device that received data from a failed peer always sees that peer's record.
 *
 * <p>Each {@link DeviceFleet} owns its registry: in thread mode a map of this process ({@link #inMemory()}); in
 * per-device-process mode a board in shared memory ({@code process.SharedFailureBoard}) that every worker writes
 * and reads; across nodes, each node's board and the run's rendezvous ({@code process.NodeFailureBoard}). A failure keeps
 * its {@link org.dtorch.core.communication.FailureKind} in every one.
 *
 * <p>Thread-safe: every implementation.
 */
public interface FailureRegistry extends AutoCloseable {

    /** Records that {@code operandId} failed; the first cause stays. */
    void fail(long operandId, Throwable cause);

    /** Why {@code operandId} failed, or null. */
    Throwable failure(long operandId);

    /** False until something failed: the common case skips every lookup. */
    boolean anyFailure();

    /** Forgets an operand that nobody uses any more. */
    void forget(long operandId);

    /** Operands recorded as failed. */
    int size();

    /**
     * After a kernel that communicated: why an input or output of {@code op} failed where this registry does not see directly
     * (another node of a run across hosts), or null. The default, for registries every peer writes, has nothing more to
     * say than {@link #failure}.
     */
    default Throwable remoteFailure(org.dtorch.core.graph.Operator op) {
        return null;
    }

    /** Releases what the registry holds (a mapping, a connection); the default holds nothing. */
    @Override
    default void close() {
    }

    /** A registry for devices that are threads of this process. */
    static FailureRegistry inMemory() {
        return new FailureRegistry() {
            private final Map<Long, Throwable> failures = new ConcurrentHashMap<>();
            /** Set once anything failed: until then the per-operator checks cost one volatile read. */
            private volatile boolean any;

            @Override
            public void fail(long operandId, Throwable cause) {
                failures.putIfAbsent(operandId, cause);
                any = true;
            }

            @Override
            public Throwable failure(long operandId) {
                return any ? failures.get(operandId) : null;
            }

            @Override
            public boolean anyFailure() {
                return any;
            }

            /**
             * Nothing to remove while nothing failed. An operand is forgotten once no operator uses it, so its failure,
             * if any, was recorded before the last use was dropped, and {@code any} is visible here.
             */
            @Override
            public void forget(long operandId) {
                if (any) {
                    failures.remove(operandId);
                }
            }

            @Override
            public int size() {
                return failures.size();
            }
        };
    }
}
