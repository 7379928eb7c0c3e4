package org.dtorch.core.device;

/**
 * The kind of a device: the host CPU or a GPU.
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum DeviceKind {
    /** The host CPU. Several logical CPU devices may share the physical CPU. */
    CPU,
    /** A CUDA GPU. */
    GPU;

    /** The lower-case name used in paths and keys, for example {@code cpu}. */
    public String shortName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
