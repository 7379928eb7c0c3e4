package org.dtorch.core.communication.promise;

import java.util.Objects;
import org.dtorch.core.device.DeviceKind;

/**
 * Factories of promises (seed section 4.2.3).
 *
 * <p>Thread-safe: stateless.
 */
public final class TensorPromises {

    private TensorPromises() {
    }

    /**
     * A new tensor promise of the given backend.
     *
     * @throws UnsupportedOperationException for FILE and NETWORK until their issues land
     */
    public static TensorPromise create(TensorPromiseType type) {
        requireBuilt(type);
        return new MemoryTensorPromise();
    }

    /**
     * Rebuilds, in this process, a promise serialized in another one.
     *
     * @throws IllegalArgumentException      for MEMORY, which never crosses a process
     * @throws UnsupportedOperationException for FILE and NETWORK until their issues land
     */
    public static TensorPromise fromSerialized(TensorPromiseType type, String data) {
        throw cannotRebuild(type, data);
    }

    /** A new void promise of the given backend. */
    public static VoidPromise createVoid(TensorPromiseType type) {
        requireBuilt(type);
        return new MemoryVoidPromise();
    }

    /** Rebuilds a void promise serialized in another process. */
    public static VoidPromise voidFromSerialized(TensorPromiseType type, String data) {
        throw cannotRebuild(type, data);
    }

    /**
     * The backend for a value produced on a device of {@code kind}.
     *
     * <p>In thread mode every device is a thread of the client's process: MEMORY. In per-device-process
     * mode the value is produced in a worker process: FILE, for CPU devices too. (The seed keeps CPU on
     * MEMORY because its CPU kernels always run in the controller's process; here CPU devices get worker
     * processes of their own, see docs/decisions.md.)
     */
    public static TensorPromiseType typeFor(DeviceKind kind, boolean perDevicePerProcess) {
        Objects.requireNonNull(kind, "kind");
        return perDevicePerProcess ? TensorPromiseType.FILE : TensorPromiseType.MEMORY;
    }

    private static void requireBuilt(TensorPromiseType type) {
        if (Objects.requireNonNull(type, "type") != TensorPromiseType.MEMORY) {
            throw notBuilt(type);
        }
    }

    private static RuntimeException cannotRebuild(TensorPromiseType type, String data) {
        Objects.requireNonNull(data, "data");
        if (Objects.requireNonNull(type, "type") == TensorPromiseType.MEMORY) {
            return new IllegalArgumentException(
                "a MEMORY promise cannot be rebuilt from serialized data ('" + data + "'); it never leaves its process");
        }
        return notBuilt(type);
    }

    private static UnsupportedOperationException notBuilt(TensorPromiseType type) {
        return new UnsupportedOperationException(type == TensorPromiseType.FILE
            ? "FILE promises (futures in another process of this host, over shared memory) are not built yet: "
                + "they come with the per-device-process issue"
            : "NETWORK promises (futures on another host) are not built yet: they come with the multi-host issue");
    }
}
