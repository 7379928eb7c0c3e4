package org.dtorch.core.runtime;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which operands failed, and why, for the whole runtime. A device records an operator's outputs as failed
 * before it runs the operator on placeholder data (or as soon as its kernel throws); every device checks
 * the registry after running an operator. Because data only crosses devices inside a communicating
 * kernel, a device that received data from a failed peer always sees that peer's record.
 *
 * <p>Thread-safe: a concurrent map.
 */
final class FailureRegistry {
    private final Map<Long, Throwable> failures = new ConcurrentHashMap<>();
    /** Set once anything failed: until then the per-operator checks cost one volatile read. */
    private volatile boolean anyFailure;

    void fail(long operandId, Throwable cause) {
        failures.putIfAbsent(operandId, cause);
        anyFailure = true;
    }

    Throwable failure(long operandId) {
        return anyFailure ? failures.get(operandId) : null;
    }

    /** False until something failed: the common case skips every lookup. */
    boolean anyFailure() {
        return anyFailure;
    }

    /** Forgets an operand that nobody uses any more. */
    void forget(long operandId) {
        failures.remove(operandId);
    }

    int size() {
        return failures.size();
    }
}
