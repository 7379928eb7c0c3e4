package org.dtorch.core.device;

/**
 * The kind of a device: the host CPU or a CUDA GPU.
 *
 * <p>Thread-safe: an immutable enum.
 */
public enum DeviceKind {
    /** The host CPU. Several logical CPU devices may share the physical CPU. */
    CPU("cpu"),
    /** A CUDA GPU, through libtorch's CUDA build (see {@link Cuda}). */
    CUDA("cuda");

    private final String shortName;

    DeviceKind(String shortName) {
        this.shortName = shortName;
    }

    /** The lower-case name used in paths, keys and torch device strings: {@code cpu} or {@code cuda}. */
    public String shortName() {
        return shortName;
    }
}
