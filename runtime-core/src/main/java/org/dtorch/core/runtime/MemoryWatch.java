package org.dtorch.core.runtime;

/**
 * When a device's tensors look like they grow without bound: the bytes of the tensors a device holds, sampled at every
 * {@code sync()} (when the device runs the sync's marker), rose strictly at each of {@code growthSyncs} consecutive
 * syncs and are at least {@code floorBytes} at the last of them. The device then logs one warning, naming itself and
 * the bytes at each of those syncs, and never again. Tensor bytes rather than the process's figures, since shared
 * memory and the CUDA allocator hold caches that legitimately grow; strict growth at every sync, so that a loop that
 * frees anything between two syncs is not flagged.
 *
 * <p>Thread-safe: immutable.
 *
 * @param growthSyncs how many consecutive growths warn; 0 never warns
 * @param floorBytes  the fewest bytes, at the last of those syncs, that warn
 */
public record MemoryWatch(int growthSyncs, long floorBytes) {
    /** The default number of consecutive growths: a training loop that keeps every step's loss gets there in 10 steps. */
    public static final int DEFAULT_GROWTH_SYNCS = 10;
    /**
     * The default floor, 1 GiB: twice the native-memory budget at which the runtime requests a garbage collection
     * ({@code dtorch.memory.gcBudgetMiB}, 512 MiB), so handles a program dropped without closing them are collected
     * before they can reach it, and small programs that keep tensors on purpose are not worth a warning.
     */
    public static final long DEFAULT_FLOOR_BYTES = 1L << 30;
    /** The defaults. */
    public static final MemoryWatch DEFAULTS = new MemoryWatch(DEFAULT_GROWTH_SYNCS, DEFAULT_FLOOR_BYTES);
    /** Never warns. */
    public static final MemoryWatch OFF = new MemoryWatch(0, 0);

    /** Validates the components. */
    public MemoryWatch {
        if (growthSyncs < 0) {
            throw new IllegalArgumentException("memory watch: growthSyncs must be >= 0 (0 is off), got " + growthSyncs);
        }
        if (floorBytes < 0) {
            throw new IllegalArgumentException("memory watch: floorBytes must be >= 0, got " + floorBytes);
        }
    }
}
