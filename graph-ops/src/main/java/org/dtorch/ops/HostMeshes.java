package org.dtorch.ops;

import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.kernel.KernelContext;

/**
 * The rules for CPU meshes of a runtime on CUDA: such a mesh is the host memory of the GPU workers of the same ids,
 * so a kernel places its tensors by the mesh's kind, not by its worker's stream.
 *
 * <p>Thread-safe: stateless.
 */
final class HostMeshes {

    private HostMeshes() {
    }

    /** Where this worker keeps tensors of {@code mesh}: its stream's device, or the host for a CPU mesh. */
    static Device placement(KernelContext ctx, DeviceMesh mesh) {
        Device physical = ctx.stream().device();
        return mesh.kind() == physical.kind() ? physical : Device.cpu(0);
    }

    /**
     * True when a move from {@code source} to {@code target} in a runtime on CUDA touches the host only through
     * device moves: one side is a CUDA mesh, or nothing moves at all.
     */
    static boolean movesBetweenKindsOrStays(Sharding source, Sharding target) {
        return source.mesh().kind() != target.mesh().kind() || source.equals(target)
            || source.mesh().kind() == DeviceKind.CUDA;
    }
}
