package org.dtorch.core.graph;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.kernel.KernelContext;

/**
 * What one device runs for one operator: local tensors in, local tensors out.
 *
 * <p>Not thread-safe: one device thread calls one kernel instance.
 */
public interface DeviceKernel {

    /**
     * Computes this device's outputs.
     *
     * @param inputs this device's local tensor of every input, in order; null where the device does not hold
     *               that input (not in its mesh). The kernel must not close or keep them.
     * @return one entry per output: a new tensor the caller owns, or null where the device does not hold that
     *         output. An in-place operator may return its input (the runtime then keeps one reference).
     */
    List<Tensor> run(KernelContext ctx, List<Tensor> inputs);

    /**
     * Called instead of (or after) {@link #run} when an input failed upstream or {@code run} threw: system
     * kernels that complete a promise report the failure there. The default does nothing.
     */
    default void failed(KernelContext ctx, Throwable cause) {
    }
}
