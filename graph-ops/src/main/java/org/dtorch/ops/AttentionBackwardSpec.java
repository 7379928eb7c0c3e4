package org.dtorch.ops;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;

/**
 * The gradients of query, key and value of a {@code scaled_dot_product_attention} call that {@link AttentionGraphSpec}
 * ran, as one operator: each device runs the backward of the libtorch graph its forward kept
 * ({@code torch::autograd::grad}), so the kernels are libtorch's derivative of the call as the device ran it (the fused
 * flash or memory-efficient attention backward on CUDA where their conditions hold, the CPU flash attention's otherwise),
 * from what the forward saved. A pass with {@code retain_graph} keeps the graph for another; otherwise libtorch frees
 * what it saved (the output's device tensor keeps the graph's bare structure).
 *
 * <p>Inputs: the output's gradient {@code g} (placed as the output), the output, and the forward's three leaves. Outputs:
 * the three gradients, each shaped and placed as its leaf. No derivative of its own: a pass that builds a graph of its
 * gradients uses the decomposition instead ({@code org.dtorch.autograd.Attention}).
 *
 * <p>Immutable. Thread-safe.
 */
public final class AttentionBackwardSpec implements OpSpec {
    private static final AttentionBackwardSpec RETAINING = new AttentionBackwardSpec(true);
    private static final AttentionBackwardSpec FREEING = new AttentionBackwardSpec(false);
    private final boolean retain;

    private AttentionBackwardSpec(boolean retain) {
        this.retain = retain;
    }

    /** The operator that keeps the graph for another pass ({@code retain}), or frees what it saved. */
    public static AttentionBackwardSpec of(boolean retain) {
        return retain ? RETAINING : FREEING;
    }

    /** True when the graph is kept for another pass. */
    public boolean retains() {
        return retain;
    }

    /**
     * The gradients of {@code leaves}, the last three outputs of an {@link AttentionGraphSpec} operator, for {@code g},
     * the gradient of its output {@code out}: {@code g} moved first to the output's placements. Unless {@code retain},
     * the graph's saved tensors are freed after (a second pass through it fails, as PyTorch's does).
     */
    public static List<DTensor> gradients(DTensor g, DTensor out, List<DTensor> leaves, boolean retain) {
        DTensor placed = g.placements().equals(out.placements()) ? g : g.redistribute(out.mesh(), out.placements().toArray(Placement[]::new));
        return g.runtime().applyMulti(of(retain), placed, out, leaves.get(0), leaves.get(1), leaves.get(2));
    }

    @Override
    public String name() {
        return "scaled_dot_product_attention_backward";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 5);
        Rules.sameMesh(name(), inputs);
        TensorMeta g = inputs.get(0);
        TensorMeta out = inputs.get(1);
        if (!Arrays.equals(g.shape(), out.shape()) || g.dtype() != out.dtype()) {
            throw new IllegalArgumentException(name() + ": the gradient " + g + " does not match the output " + out);
        }
        if (!g.placements().equals(out.placements())) {
            throw new ShardingException(name(), inputs, "the gradient must have the output's placements " + out.placements(),
                AttentionStrategy.INSTANCE.legal());
        }
        return List.copyOf(inputs.subList(2, 5)); // each gradient is shaped and placed as its leaf
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return (ctx, inputs) -> {
            Tensor out = inputs.get(1);
            List<Tensor> leaves = inputs.subList(2, 5);
            if (!out.requires_grad()) { // an empty shard: its forward computed nothing
                return List.of(torch.zeros_like(leaves.get(0)), torch.zeros_like(leaves.get(1)), torch.zeros_like(leaves.get(2)));
            }
            return WorkerAutograd.grad(out, leaves, inputs.getFirst(), retain);
        };
    }

    @Override
    public String toString() {
        return "AttentionBackwardSpec(retain=" + retain + ")";
    }
}
