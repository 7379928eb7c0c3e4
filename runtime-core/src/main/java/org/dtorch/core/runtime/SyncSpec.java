package org.dtorch.core.runtime;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * Completes a {@link VoidPromise} on one device once every operator queued to that device before it has
 * run (the seed's {@code SyncFuture}, one per device, joined by a
 * {@link org.dtorch.core.communication.promise.VoidFutureCollect}).
 *
 * <p>Thread-safe: immutable; the promise is completed once, by the worker.
 */
public final class SyncSpec implements OpSpec {
    private final VoidPromise promise;
    private final long device;

    /** A marker for {@code device} that completes {@code promise}. */
    public SyncSpec(VoidPromise promise, long device) {
        this.promise = Objects.requireNonNull(promise, "promise");
        this.device = device;
    }

    @Override
    public String name() {
        return "sync";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (!inputs.isEmpty()) {
            throw new IllegalArgumentException("sync takes no input");
        }
        return List.of();
    }

    /** The device it marks. */
    public long device() {
        return device;
    }

    @Override
    public List<Long> devices(Operator op) {
        return List.of(device);
    }

    @Override
    public void abandon(Throwable cause) {
        TensorPromises.abandon(promise, cause);
    }

    /** The promise the worker completes. */
    public VoidPromise promise() {
        return promise;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                ctx.stream().synchronize();
                promise.setValue();
                return List.of();
            }

            @Override
            public void failed(KernelContext ctx, Throwable cause) {
                promise.setException(cause);
            }
        };
    }
}
