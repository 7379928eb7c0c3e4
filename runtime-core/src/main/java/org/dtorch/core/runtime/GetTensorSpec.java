package org.dtorch.core.runtime;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * The seed's {@code GetTensorOp}: carries a {@link TensorPromise} into the graph; the worker of the one
 * device that holds the input sets the promise's value (or its error). The input must live on a
 * one-device mesh: {@code getTensorAsync} redistributes a distributed tensor there first.
 *
 * <p>Thread-safe: immutable; the promise is completed once, by the worker.
 */
public final class GetTensorSpec implements OpSpec {
    private final TensorPromise promise;

    /** An operator that completes {@code promise} with its input's value. */
    public GetTensorSpec(TensorPromise promise) {
        this.promise = Objects.requireNonNull(promise, "promise");
    }

    @Override
    public String name() {
        return "get_tensor";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (inputs.size() != 1) {
            throw new IllegalArgumentException("get_tensor takes one input, got " + inputs.size());
        }
        if (inputs.getFirst().sharding().mesh().count() != 1) {
            throw new IllegalArgumentException("get_tensor needs a tensor on one device; " + inputs.getFirst()
                + " is distributed: redistribute it to one device first");
        }
        return List.of();
    }

    @Override
    public void abandon(Throwable cause) {
        TensorPromises.abandon(promise, cause);
    }

    /** The promise the worker completes. */
    public TensorPromise promise() {
        return promise;
    }

    /** The value is copied to the host anyway, so one on a host mesh is fine (decision 141). */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return true;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                Tensor value = inputs.getFirst();
                if (!value.is_cuda()) {
                    promise.setValue(value);
                    return List.of();
                }
                // The client gets a host tensor: copied on the worker's stream, synchronously, so the promise
                // completes when the copy is done.
                try (Tensor host = value.cpu()) {
                    promise.setValue(host);
                }
                return List.of();
            }

            @Override
            public void failed(KernelContext ctx, Throwable cause) {
                promise.setException(cause);
            }
        };
    }
}
