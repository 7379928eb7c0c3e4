package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * {@code to_local} on one device: completes a {@link TensorPromise} with the device's local tensor of its one input (its
 * shard, replica or partial value), with no redistribution. {@link LocalShards#toLocal} queues one per device of the
 * mesh, each running on its device alone, so that in per-device-process mode each worker is sent one promise.
 *
 * <p>In thread mode the promise gets the worker's tensor itself (a Memory promise keeps a reference), so the client's
 * tensor aliases the shard; a CUDA tensor is synchronized with the worker's stream first, so its values are there when
 * the client reads them. A spec decoded in a worker process ({@link #copying}) sets a copy of a CUDA tensor, which the
 * File promise lends to the client through CUDA IPC, so that the client never writes into the worker's shard; a CPU
 * tensor is copied into the promise's shared memory anyway.
 *
 * <p>A failure goes to the promise, or, for a spec rebuilt in a worker process, to the sink its codec gave.
 *
 * <p>Thread-safe: immutable; the promise is completed once, by the device.
 */
public final class LocalValueSpec implements OpSpec {
    private final TensorPromise promise;
    private final long device;
    private final boolean copyCuda;
    /** Where failures go instead of the promise (in a worker process), or null. */
    private final Consumer<Throwable> failureSink;

    private LocalValueSpec(TensorPromise promise, long device, boolean copyCuda, Consumer<Throwable> failureSink) {
        this.promise = Objects.requireNonNull(promise, "to_local: promise is null");
        if (device < 0) {
            throw new IllegalArgumentException("to_local: device must be >= 0, got " + device);
        }
        this.device = device;
        this.copyCuda = copyCuda;
        this.failureSink = failureSink;
    }

    /** Completes {@code promise} with the local tensor of {@code device}, by reference. */
    public LocalValueSpec(TensorPromise promise, long device) {
        this(promise, device, false, null);
    }

    /** The spec a worker process runs: a CUDA value is copied, and failures go to {@code sink}. */
    static LocalValueSpec copying(TensorPromise promise, long device, Consumer<Throwable> sink) {
        return new LocalValueSpec(promise, device, true, Objects.requireNonNull(sink, "sink"));
    }

    /** The promise. */
    public TensorPromise promise() {
        return promise;
    }

    /** The device whose local tensor completes the promise. */
    public long device() {
        return device;
    }

    @Override
    public String name() {
        return "to_local";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        if (!inputs.getFirst().sharding().mesh().contains(device)) {
            throw new IllegalArgumentException("to_local: device " + device + " is not in the mesh of " + inputs.getFirst());
        }
        return List.of();
    }

    @Override
    public List<Long> devices(Operator op) {
        return List.of(device);
    }

    /** A local tensor on a CPU mesh of a runtime on CUDA is read where it is. */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return true;
    }

    @Override
    public void abandon(Throwable cause) {
        if (failureSink != null) {
            failureSink.accept(cause);
        } else {
            TensorPromises.abandon(promise, cause);
        }
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                Tensor value = inputs.getFirst();
                if (value.is_cuda()) {
                    ctx.stream().synchronize();
                    if (copyCuda) {
                        try (Tensor copy = value.clone()) {
                            promise.setValue(copy);
                        }
                        return List.of();
                    }
                }
                promise.setValue(value);
                return List.of();
            }

            @Override
            public void failed(KernelContext ctx, Throwable cause) {
                if (failureSink != null) {
                    failureSink.accept(cause);
                } else {
                    promise.setException(cause);
                }
            }
        };
    }

    @Override
    public String toString() {
        return "LocalValueSpec(device " + device + ")";
    }
}
