package org.dtorch.core.communication.store;

/**
 * Which backend a {@link TensorStore} uses (docs/communication-core.md, Three layers).
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum TensorStoreType {
    /** Ranks are threads of one process: a shared in-memory map, zero-copy. */
    MEMORY,
    /** Ranks are processes of one host: shared memory. */
    FILE,
    /** Ranks are on several hosts: a c10d TCPStore for the bookkeeping, Gloo for the bytes. */
    NETWORK
}
