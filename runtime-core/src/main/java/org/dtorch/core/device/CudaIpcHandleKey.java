package org.dtorch.core.device;

import java.util.Arrays;

/**
 * A CUDA IPC handle (of an allocation or of an event) on one device, as a map key: the device index and the handle's
 * 64 bytes, compared by value. The caller gives up the array: it must not change it afterwards (clone first).
 *
 * <p>Thread-safe: immutable as long as {@code bytes} is not changed.
 *
 * @param device the CUDA device index the handle belongs to (in this process's numbering)
 * @param bytes  the handle's bytes
 */
public record CudaIpcHandleKey(int device, byte[] bytes) {
    @Override
    public boolean equals(Object o) {
        return o instanceof CudaIpcHandleKey k && k.device == device && Arrays.equals(k.bytes, bytes);
    }

    @Override
    public int hashCode() {
        return device * 31 + Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return "CUDA IPC handle on device " + device;
    }
}
