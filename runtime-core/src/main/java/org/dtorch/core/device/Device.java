package org.dtorch.core.device;

import java.util.Objects;

/**
 * One device: its kind and its index among devices of that kind (DTorch's global device id).
 *
 * <p>Thread-safe: an immutable value.
 *
 * @param kind  the device kind
 * @param index the device index, zero or more
 */
public record Device(DeviceKind kind, int index) {

    /** Validates the components. */
    public Device {
        Objects.requireNonNull(kind, "kind");
        if (index < 0) {
            throw new IllegalArgumentException("device index must be >= 0, got " + index);
        }
    }

    /** The CPU device with the given index. */
    public static Device cpu(int index) {
        return new Device(DeviceKind.CPU, index);
    }

    /** The CUDA device with the given index (its index among the devices this process sees). */
    public static Device cuda(int index) {
        return new Device(DeviceKind.CUDA, index);
    }

    /** Prints as torch does: {@code cpu:0} or {@code cuda:3}. */
    @Override
    public String toString() {
        return kind.shortName() + ":" + index;
    }
}
