package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)}: ATen's one-kernel
 * derivative of RMS norm, giving the input's gradient (the input's shape) and the weight's (the weight's shape). Rows
 * (the dimensions before {@code normalized_shape}) are independent in the input's gradient, and the weight's gradient
 * sums a term per row. So per mesh dimension:
 * <ul>
 *   <li>{@code S(d)} on a row dimension (of the input, else of the gradient) stays for the gradient, the input and
 *       {@code rstd} alike, with the weight {@code R}: the input's gradient is {@code S(d)} and the weight's a partial
 *       sum {@code P(sum)};</li>
 *   <li>otherwise everything is {@code R}, and so are both gradients.</li>
 * </ul>
 * libtorch has no meta kernel for it (nor a CPU kernel: it runs on CUDA); {@link #outputShapes} and {@link #outputDtype}
 * give the outputs.
 *
 * <p>Stateless. Thread-safe.
 */
final class RmsNormBackwardStrategy implements ShardingStrategy {
    static final RmsNormBackwardStrategy INSTANCE = new RmsNormBackwardStrategy();
    static final String NAME = "_fused_rms_norm_backward";

    private RmsNormBackwardStrategy() {
    }

    @Override
    public String family() {
        return "rms-norm-backward";
    }

    @Override
    public String legal() {
        return "per mesh dimension: grad_out, input and rstd S(d) on a dimension before normalized_shape with the weight R; or all R";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        check(call, inputs);
        TensorMeta grad = inputs.get(0);
        TensorMeta x = inputs.get(1);
        int rows = x.ndim() - normalized(call).length;
        List<List<Placement>> in = ShardingStrategy.replicatedInputs(inputs.size(), x.placements().size());
        List<Placement> gradInput = new ArrayList<>();
        List<Placement> gradWeight = new ArrayList<>();
        for (int m = 0; m < x.placements().size(); m++) {
            int d = rowShard(x.placement(m), rows);
            if (d < 0) {
                d = rowShard(grad.placement(m), rows);
            }
            if (d < 0) {
                gradInput.add(Placement.replicate());
                gradWeight.add(Placement.replicate());
                continue;
            }
            for (int i = 0; i < 3; i++) {
                in.get(i).set(m, Placement.shard(d));
            }
            gradInput.add(Placement.shard(d));
            gradWeight.add(Placement.partial());
        }
        return new Decision(in, List.of(gradInput, gradWeight));
    }

    /** The dimension {@code p} shards when it is one of the first {@code rows}, else -1. */
    private static int rowShard(Placement p, int rows) {
        return p instanceof Shard s && s.dim() < rows ? s.dim() : -1;
    }

    /** The input's gradient has the input's shape, the weight's the weight's. */
    @Override
    public long[][] outputShapes(AtenCall call, List<TensorMeta> inputs) {
        check(call, inputs);
        return new long[][] {inputs.get(1).shape(), inputs.get(3).shape()};
    }

    /**
     * The input's dtype, which both gradients have where the weight has it too (libtorch has no CPU kernel to run the
     * call on small tensors instead).
     */
    @Override
    public ScalarType outputDtype(AtenCall call, List<TensorMeta> inputs) {
        check(call, inputs);
        ScalarType dtype = inputs.get(1).dtype();
        if (inputs.get(3).dtype() != dtype) {
            throw new UnsupportedOperationException(call.qualifiedName() + " takes a weight of the input's dtype on distributed "
                + "tensors (input " + dtype + ", weight " + inputs.get(3).dtype() + ")");
        }
        return dtype;
    }

    private static long[] normalized(AtenCall call) {
        return (long[]) call.constant("normalized_shape");
    }

    /** Four tensors, the gradient and rstd shaped like the input's rows, and both gradients asked for. */
    private static void check(AtenCall call, List<TensorMeta> inputs) {
        if (inputs.size() != 4) {
            throw new UnsupportedOperationException(call.qualifiedName() + " takes a weight on distributed tensors");
        }
        Object mask = call.constant("output_mask");
        if (mask instanceof boolean[] m && !(m[0] && m[1])) {
            throw new UnsupportedOperationException(call.qualifiedName() + " computes both gradients on distributed tensors "
                + "(output_mask [True, True])");
        }
        TensorMeta x = inputs.get(1);
        if (!Arrays.equals(inputs.get(0).shape(), x.shape())) {
            throw new IllegalArgumentException(call.qualifiedName() + ": grad_out " + Arrays.toString(inputs.get(0).shape())
                + " and input " + Arrays.toString(x.shape()) + " differ in shape");
        }
    }
}
