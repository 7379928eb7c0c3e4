package org.dtorch.ops;

import java.util.List;
import java.util.function.Function;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.kernel.KernelContext;

/**
 * A kernel that computes one output from the device's local inputs with no communication: what every
 * operator whose sharding rule needs no data from other devices runs.
 *
 * <p>Thread-safe when its function is: a spec may share one instance among all its operators and devices when the
 * function keeps nothing between calls (as {@link BinarySpec}'s and {@link UnarySpec}'s do).
 */
final class LocalKernel implements DeviceKernel {
    private final Function<List<Tensor>, Tensor> compute;

    LocalKernel(Function<List<Tensor>, Tensor> compute) {
        this.compute = compute;
    }

    @Override
    public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
        return java.util.Collections.singletonList(compute.apply(inputs));
    }
}
