package org.dtorch.core.memory;

/**
 * Memory this process maps that is not a tensor the runtime holds: counted where it is mapped and unmapped, for the
 * memory statistics. A worker process (per-device-process mode) runs one device, so these are that device's; in
 * thread mode every device of the JVM shares them.
 *
 * <p>Thread-safe: the gauges are.
 */
public final class ProcessMemory {
    /** Bytes of shared-memory regions ({@link org.dtorch.core.shm.SharedRegion}) mapped in this process. */
    public static final ByteGauge SHARED_REGIONS = new ByteGauge();
    /** Bytes of other processes' CUDA allocations this process opened through CUDA IPC and has not closed yet. */
    public static final ByteGauge CUDA_IPC_MAPPINGS = new ByteGauge();
    /** Bytes of files this process has mapped to read or write tensors (safetensors loads and saves) and not unmapped yet. */
    public static final ByteGauge FILE_MAPPINGS = new ByteGauge();

    private ProcessMemory() {
    }
}
