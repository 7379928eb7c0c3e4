package org.dtorch.api;

import java.util.List;
import java.util.Objects;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.PromiseSpec;

/**
 * Values the client reads from a {@link DTorch} runtime: the future of a whole tensor ({@link #getTensorAsync}), which
 * a {@code get_tensor} operator completes on one device, and the futures of the devices having run everything queued.
 * Nothing here waits but {@link #sync}.
 *
 * <p>Not thread-safe: the client thread that owns the runtime; the futures returned may be read from any thread.
 */
final class Values {
    private final DTorch runtime;
    private final Aliasing aliasing;

    Values(DTorch runtime, Aliasing aliasing) {
        this.runtime = runtime;
        this.aliasing = aliasing;
    }

    /** {@link DTorch#getTensorAsync(DTensor)}. */
    TensorFuture getTensorAsync(DTensor t) {
        Objects.requireNonNull(t, "getTensorAsync: tensor is null");
        t.ensureOpen();
        aliasing.fresh(t);
        DTensor local = t;
        if (t.mesh().count() != 1) {
            // Gathered on one device of the runtime's own kind: in a runtime on CUDA a CPU mesh is the workers' host
            // memory, where only factories and moves run, so a tensor on one is gathered on the GPU.
            DeviceMesh one = DeviceMesh.of(runtime.deviceKind(), t.mesh().deviceIds().getFirst());
            local = t.redistribute(one, Placement.replicate());
        }
        // A host value's shape and dtype are known: a File future's getter allocates it before it sleeps, so that the
        // woken getter makes no native call.
        ExpectedValue expected = local.mesh().kind() == DeviceKind.CPU ? new ExpectedValue(local.shape(), local.dtype()) : null;
        TensorPromise promise = runtime.runtime().newPromise(local.mesh().deviceIds().getFirst(), expected);
        TensorFuture future = promise.getFuture();
        try {
            // The tensor itself (not a gathered copy) may be written after: its value is copied, as torch's .cpu() of a
            // host tensor is not, so that to_torch() is what the tensor held at this point of the program.
            runtime.graph().add(PromiseSpec.getTensor(promise, local == t), List.of(local.operand()));
        } finally {
            if (local != t) {
                local.close();
            }
        }
        return new KeptAliveTensorFuture(future, t);
    }

    /** A future that completes when every device has run everything queued so far. */
    VoidFuture syncFuture() {
        return runtime.runtime().syncFuture();
    }

    /** Blocks until every device has run everything queued so far, up to the runtime's timeout. */
    void sync() {
        syncFuture().get();
    }
}
