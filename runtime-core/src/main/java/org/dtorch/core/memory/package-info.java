/**
 * Memory accounting: {@link org.dtorch.core.memory.ByteGauge} (live and peak bytes of one kind of memory), the
 * process-wide gauges of shared-memory regions and CUDA IPC mappings ({@link org.dtorch.core.memory.ProcessMemory}),
 * and the CUDA caching allocator's statistics ({@link org.dtorch.core.memory.CudaAllocatorStats}). The runtime's
 * per-device view over them is {@link org.dtorch.core.runtime.MemoryStats}.
 */
package org.dtorch.core.memory;
