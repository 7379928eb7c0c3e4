package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.AtenCall;

/**
 * A {@code scaled_dot_product_attention} call whose gradients will be asked for: each device runs the call under
 * libtorch's autograd, on query, key and value detached from their tensors and requiring grad, so its output holds
 * libtorch's graph of the call, with what the fused kernels save for their backward (the log-sum-exp of each row) or
 * the math backend's weights. {@link AttentionBackwardSpec} then runs that graph's backward: the forward is not computed
 * twice. The graph lives as long as the output's device tensor does.
 *
 * <p>Inputs: the call's tensor inputs (query, key, value, and the mask where it has one), placed as the plain call's
 * strategy runs them ({@link AttentionStrategy}), to which implicit redistribution moves them. Outputs: the attention
 * output, then the three detached inputs (the graph's leaves, each sharing its input's memory and metadata), which the
 * backward operator takes to name what it differentiates against.
 *
 * <p>Immutable. Thread-safe.
 */
public final class AttentionGraphSpec implements OpSpec, PlacementChoice {
    private final AtenSpec forward;

    /** {@code call}, a {@code scaled_dot_product_attention} call without dropout, keeping its graph. */
    public AttentionGraphSpec(AtenCall call) {
        if (!takes(call)) {
            throw new IllegalArgumentException("attention graph: " + call.qualifiedName() + " is not scaled_dot_product_attention "
                + "without dropout (dropout_p=" + call.constant("dropout_p") + ")");
        }
        this.forward = new AtenSpec(call);
    }

    /** True for a {@code scaled_dot_product_attention} call without dropout, which this operator can run. */
    public static boolean takes(AtenCall call) {
        return call.overload().name().equals("scaled_dot_product_attention")
            && !(call.constant("dropout_p") instanceof Number p && p.doubleValue() != 0.0);
    }

    /** The attention call. */
    public AtenCall call() {
        return forward.call();
    }

    @Override
    public String name() {
        return forward.name();
    }

    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        return forward.choose(inputs);
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        TensorMeta out = forward.inferOutputs(inputs).getFirst(); // checks the inputs and their placements
        return List.of(out, inputs.get(0), inputs.get(1), inputs.get(2));
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta out = op.outputs().getFirst().meta();
        // libtorch's CPU flash attention fails on inputs without elements; an empty shard has nothing to differentiate.
        long[] emptyShape = out.layout().localNumel(deviceId) == 0 ? out.layout().localShape(deviceId) : null;
        AtenCall call = forward.call();
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                List<Tensor> made = new ArrayList<>(4);
                try {
                    List<Tensor> args = new ArrayList<>(inputs);
                    for (int i = 0; i < 3; i++) {
                        Tensor leaf = inputs.get(i).detach();
                        made.add(leaf);
                        args.set(i, leaf);
                    }
                    Tensor result;
                    if (emptyShape != null) {
                        try (TensorOptions options = inputs.getFirst().options().dtype(new ScalarTypeOptional(out.dtype()))) {
                            result = torch.empty(emptyShape, options, new MemoryFormatOptional());
                        }
                    } else {
                        result = WorkerAutograd.on(() -> {
                            for (int i = 0; i < 3; i++) {
                                args.get(i).requires_grad_(true);
                            }
                            return call.call(args).getFirst();
                        });
                    }
                    made.addFirst(result);
                    return made;
                } catch (RuntimeException | Error e) {
                    made.forEach(Tensor::close);
                    throw e;
                }
            }
        };
    }

    @Override
    public String toString() {
        return "AttentionGraphSpec(" + forward.call() + ")";
    }
}
