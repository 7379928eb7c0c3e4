package org.dtorch.core.communication.promise;

/**
 * Which backend carries a promise's value (docs/communication-core.md, Three layers).
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum TensorPromiseType {
    /** Promise and future in one process. */
    MEMORY,
    /** Promise and future in two processes of one host, over shared memory. */
    FILE,
    /** Promise and future on two hosts, through a c10d {@code TCPStore} ({@link NetworkPromises}). */
    NETWORK
}
