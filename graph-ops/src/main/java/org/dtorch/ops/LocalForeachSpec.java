package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.AtenCall;

/**
 * A multi-tensor in-place ATen operator ({@code _foreach_add_}, {@code _fused_adamw_}, {@code _fused_sgd_}, ...) run on
 * the local tensors of every input: each device makes one call over its own shards of all the tensors, with no
 * communication. That is an optimizer step of distributed parameters: the update of a parameter element reads only the
 * same element of its gradient and state, so each shard updates where it lies. The inputs share one mesh; their
 * placements may differ from list entry to list entry (each parameter keeps its own), but no input is a partial sum,
 * whose update would not be the update of the sum.
 *
 * <p>Thread-safe: immutable.
 */
public final class LocalForeachSpec implements OpSpec {
    private final AtenCall call;

    /** The call {@code call} on local shards. */
    public LocalForeachSpec(AtenCall call) {
        this.call = Objects.requireNonNull(call, "call");
    }

    /** The multi-tensor call each device makes. */
    public AtenCall call() {
        return call;
    }

    /** True for a multi-tensor in-place overload: {@code _foreach_*_} or {@code _fused_*_}, writing its arguments, returning nothing. */
    public static boolean covers(AtenCall call) {
        String name = call.overload().name();
        return (name.startsWith("_foreach_") || name.startsWith("_fused_")) && name.endsWith("_")
            && !call.overload().mutatedParams().isEmpty() && call.overload().returnTypes().isEmpty();
    }

    @Override
    public String name() {
        return call.qualifiedName() + " (local shards)";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (inputs.isEmpty()) {
            return List.of();
        }
        DeviceMesh mesh = inputs.getFirst().sharding().mesh();
        for (int i = 0; i < inputs.size(); i++) {
            TensorMeta m = inputs.get(i);
            if (!m.sharding().mesh().equals(mesh)) {
                throw new IllegalArgumentException(call.qualifiedName() + ": every tensor must be on one mesh; tensor " + i + " is on "
                    + m.sharding().mesh() + ", tensor 0 on " + mesh);
            }
            if (m.placements().stream().anyMatch(Placement::isPartial)) {
                throw new IllegalArgumentException(call.qualifiedName() + ": tensor " + i + " holds partial sums (" + m.placements()
                    + "); an element-wise update of each partial value is not the update of their sum: redistribute it first");
            }
        }
        return List.of();
    }

    @Override
    public List<Integer> writtenInputs(Operator op) {
        return call.writtenInputs();
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                for (Tensor out : call.call(inputs)) {
                    out.close();
                }
                return List.of();
            }
        };
    }

    @Override
    public String toString() {
        return name();
    }
}
