package org.dtorch.autograd;

import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;

/**
 * The derivative of adaptive average pooling ({@code adaptive_avg_pool1d}, {@code 2d}, {@code 3d}). libtorch's
 * {@code _adaptive_avg_pool2d_backward} has no meta kernel, which a distributed operator needs to infer its outputs.
 * The pooling averages each output cell's window, {@code [floor(o * L / O), ceil((o + 1) * L / O))} along every spatial
 * dimension, and an average over a box is the product of the averages along each side: so the pooling is
 * {@code x} multiplied by an {@code O x L} averaging matrix along each spatial dimension, and its gradient is {@code g}
 * multiplied by the transposes. The matrices are small and replicated, so the products keep the shards of the batch and
 * channel dimensions.
 *
 * <p>Thread-safe: stateless.
 */
final class AdaptiveAveragePooling {
    private AdaptiveAveragePooling() {
    }

    /** The derivative of an adaptive average pooling over the last {@code spatial} dimensions. */
    static Derivative derivative(int spatial) {
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            long[] pooled = g[0].shape();
            DTensor gx = g[0];
            for (int axis = shape.length - spatial; axis < shape.length; axis++) {
                DTensor spread = averaging(g[0], pooled[axis], shape[axis]);
                gx = axis == shape.length - 1 ? gx.matmul(spread) : gx.transpose(axis, -1).matmul(spread).transpose(axis, -1);
            }
            return new DTensor[] {gx};
        };
    }

    /**
     * The {@code O x L} matrix whose row {@code o} averages output cell {@code o}'s window of an input of length
     * {@code L}, on {@code like}'s mesh, replicated, in its dtype.
     */
    private static DTensor averaging(DTensor like, long outputs, long length) {
        double[] values = new double[(int) (outputs * length)];
        for (long o = 0; o < outputs; o++) {
            long start = Math.floorDiv(o * length, outputs);
            long end = -Math.floorDiv(-(o + 1) * length, outputs);
            for (long l = start; l < end; l++) {
                values[(int) (o * length + l)] = 1.0 / (end - start);
            }
        }
        Placement[] replicated = new Placement[like.mesh().ndim()];
        java.util.Arrays.fill(replicated, Placement.replicate());
        DTensor m = like.runtime().tensor(values, new long[] {outputs, length}, like.mesh(), replicated);
        ScalarType dtype = like.dtype();
        return m.dtype() == dtype ? m : m.to(dtype);
    }
}
