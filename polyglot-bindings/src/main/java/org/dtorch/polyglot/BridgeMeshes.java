package org.dtorch.polyglot;

import org.dtorch.api.DTorch;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.runtime.RuntimeOptions;
import org.graalvm.polyglot.Value;

/**
 * The meshes {@link PyBridge} makes for Python: from a device type, a shape and row-major ids ({@link MeshIds} maps
 * the ids a user who thinks in GPUs writes), or from a {@link ParallelConfig}'s degrees. A device type the runtime
 * cannot make meshes of is refused, naming the launcher flag that starts a runtime that can.
 *
 * <p>Thread-safe: as the runtime's mesh factories.
 */
final class BridgeMeshes {
    private final DTorch runtime;

    BridgeMeshes(DTorch runtime) {
        this.runtime = runtime;
    }

    /** {@link PyBridge#mesh}. */
    DeviceMesh mesh(String deviceType, Value shape, Value ids, Value names) {
        DeviceKind kind = runtimeKind(deviceType);
        RuntimeOptions options = runtime.runtime().options();
        int[] intShape = BridgeArguments.ints(shape);
        return DeviceMesh.of(kind, intShape, MeshIds.logical(kind, BridgeArguments.longs(ids), options), BridgeArguments.strings(names));
    }

    /** {@link PyBridge#parallelMesh}. */
    DeviceMesh parallelMesh(String deviceType, Value degrees) {
        int[] d = BridgeArguments.ints(degrees);
        if (d.length != ParallelConfig.DIM_NAMES.size()) {
            throw new IllegalArgumentException("ParallelConfig takes " + ParallelConfig.DIM_NAMES + ", got " + d.length + " degrees");
        }
        return new ParallelConfig(d[0], d[1], d[2], d[3], d[4], d[5]).deviceMesh(runtimeKind(deviceType), runtime.runtime().devices().size());
    }

    /** The device kind of {@code deviceType}, refused when the runtime cannot make meshes of it. */
    private DeviceKind runtimeKind(String deviceType) {
        DeviceKind kind = BridgeArguments.kindOf(deviceType);
        String mismatch = MeshIds.kindMismatch(kind, runtime.runtime().options());
        if (mismatch != null) {
            throw new IllegalArgumentException(mismatch);
        }
        return kind;
    }
}
