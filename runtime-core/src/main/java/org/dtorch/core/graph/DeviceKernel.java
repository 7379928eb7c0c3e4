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
     * Computes this device's outputs, or starts to: a kernel whose communication runs in the background (an issued
     * all-reduce) returns its outputs with the completion that finishes them. The runtime stores the outputs at once and
     * runs the completion on this device's thread before anything reads, writes or releases one of them (the next
     * operator that takes one as input, a fetch, a release, a sync, or the worker's shutdown); until then nobody touches
     * them. A completion that throws fails the operator's outputs with its error. The default runs {@link #run}.
     */
    default Issued issue(KernelContext ctx, List<Tensor> inputs) {
        return new Issued(run(ctx, inputs), null);
    }

    /**
     * The outputs of {@link #issue}, as {@link #run} returns them, and what finishes them (null: they are complete).
     *
     * <p>Thread-safe: immutable; the completion runs on the device's thread.
     *
     * @param outputs    one entry per output, as {@link #run} returns
     * @param completion blocks, within the kernel's deadline, until the outputs hold their values; or null
     */
    record Issued(List<Tensor> outputs, Runnable completion) {
    }

    /**
     * Called instead of (or after) {@link #run} when an input failed upstream or {@code run} threw: system
     * kernels that complete a promise report the failure there. The default does nothing.
     */
    default void failed(KernelContext ctx, Throwable cause) {
    }
}
