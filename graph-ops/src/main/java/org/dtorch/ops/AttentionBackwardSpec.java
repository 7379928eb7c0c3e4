package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.DispatchKeySet;
import org.bytedeco.pytorch.ForceDispatchKeyGuard;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.LocalDispatchKeySet;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.AtenCall;

/**
 * The gradients of query, key and value of a {@code scaled_dot_product_attention} call, as one operator: each device
 * runs the call again on its shards under libtorch's autograd and takes the gradients of the output against {@code g}
 * ({@code torch::autograd::grad}). So the kernels are libtorch's derivative of the call as the devices run it (the
 * fused flash or memory-efficient attention backward on CUDA where their conditions hold, the CPU flash attention's
 * otherwise; grouped-query attention without a mask through the plain call, as {@link AtenCall#call} runs it), for the
 * price of the forward once more; masks are the call's own.
 *
 * <p>Inputs: the output's gradient {@code g}, then the call's tensor inputs (query, key, value and the mask where it has
 * one), placed as {@link AttentionStrategy} runs the call (leading shards alike, or {@code R}), {@code g} as its output.
 * Outputs: the three gradients, each with its input's shape, dtype and placements. No derivative of its own: a pass that
 * builds a graph of its gradients uses the decomposition instead ({@code org.dtorch.autograd.Attention}).
 *
 * <p>Thread-safe: immutable.
 */
public final class AttentionBackwardSpec implements OpSpec {
    private final AtenCall forward;

    /** The gradients of {@code forward}, a {@code scaled_dot_product_attention} call without dropout. */
    public AttentionBackwardSpec(AtenCall forward) {
        if (!forward.overload().name().equals("scaled_dot_product_attention")) {
            throw new IllegalArgumentException("attention backward: " + forward.qualifiedName() + " is not scaled_dot_product_attention");
        }
        if (forward.constant("dropout_p") instanceof Number p && p.doubleValue() != 0.0) {
            throw new IllegalArgumentException("attention backward: dropout_p=" + p + " would draw another mask than the forward's");
        }
        this.forward = forward;
    }

    /**
     * The gradients of query, key and value of {@code forward} on {@code inputs} (its tensor inputs as the forward got
     * them) for the output's gradient {@code g}: each input and {@code g} moved first where the forward's strategy runs.
     * The moved tensors are the tape's intermediates, released with the pass.
     */
    public static List<DTensor> gradients(AtenCall forward, DTensor g, DTensor[] inputs) {
        AttentionBackwardSpec spec = new AttentionBackwardSpec(forward);
        List<TensorMeta> metas = new ArrayList<>(inputs.length);
        for (DTensor t : inputs) {
            metas.add(t.meta());
        }
        ShardingStrategy.Decision d = new AtenSpec(forward).decide(metas);
        DTensor[] placed = new DTensor[inputs.length + 1];
        placed[0] = moved(g, d.outputs().getFirst());
        for (int i = 0; i < inputs.length; i++) {
            placed[i + 1] = moved(inputs[i], d.inputs().get(i));
        }
        return g.runtime().applyMulti(spec, placed);
    }

    private static DTensor moved(DTensor t, List<Placement> placements) {
        return t.meta().placements().equals(placements) ? t : t.redistribute(t.meta().sharding().mesh(), placements.toArray(Placement[]::new));
    }

    /** The attention call whose gradients this gives. */
    public AtenCall forward() {
        return forward;
    }

    @Override
    public String name() {
        return "scaled_dot_product_attention_backward";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        if (inputs.size() != forward.inputCount() + 1) {
            Rules.arity(name(), inputs, forward.inputCount() + 1);
        }
        Rules.sameMesh(name(), inputs);
        List<TensorMeta> call = inputs.subList(1, inputs.size());
        AtenSpec spec = new AtenSpec(forward);
        ShardingStrategy.Decision d = spec.decide(call);
        TensorMeta out = spec.inferOutputs(call).getFirst();
        TensorMeta g = inputs.getFirst();
        if (!Arrays.equals(g.shape(), out.shape()) || g.dtype() != out.dtype()) {
            throw new IllegalArgumentException(name() + ": the gradient " + g + " does not match the output " + out);
        }
        if (!g.placements().equals(d.outputs().getFirst())) {
            throw new ShardingException(name(), inputs, "the gradient must have the output's placements " + d.outputs().getFirst(),
                AttentionStrategy.INSTANCE.legal());
        }
        return List.copyOf(call.subList(0, 3)); // query's, key's and value's gradients are shaped and placed as they are
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                List<Tensor> leaves = new ArrayList<>(inputs.size() - 1);
                List<Tensor> outputs = List.of();
                boolean recording = GradMode.is_enabled(); // libtorch's switch is per thread; a worker's is on, unless set off
                GradMode.set_enabled(true);
                // Workers dispatch below autograd (DeviceLoop); this kernel needs it, so it puts the layer back on this
                // thread until the guard closes.
                try (LocalDispatchKeySet tls = torch.tls_local_dispatch_key_set(); DispatchKeySet included = tls.included_();
                     DispatchKeySet excluded = tls.excluded_(); DispatchKeySet autograd = torch.autograd_dispatch_keyset_with_ADInplaceOrView();
                     DispatchKeySet kept = excluded.subtract(autograd); ForceDispatchKeyGuard withAutograd = new ForceDispatchKeyGuard(included, kept)) {
                    for (int i = 1; i < inputs.size(); i++) {
                        Tensor leaf = inputs.get(i).detach();
                        if (i <= 3) {
                            leaf.requires_grad_(true);
                        }
                        leaves.add(leaf);
                    }
                    outputs = forward.call(leaves);
                    try (TensorVector outs = new TensorVector(outputs.getFirst());
                         TensorVector wrt = new TensorVector(leaves.get(0), leaves.get(1), leaves.get(2));
                         TensorVector grad = new TensorVector(inputs.getFirst()); BoolOptional retain = new BoolOptional(false);
                         TensorVector grads = torch.grad(outs, wrt, grad, retain, false, false)) {
                        // The vector's elements live in it: each gradient gets a reference of its own before it goes.
                        return List.of(new Tensor(grads.get(0)), new Tensor(grads.get(1)), new Tensor(grads.get(2)));
                    }
                } finally {
                    GradMode.set_enabled(recording);
                    leaves.forEach(Tensor::close);
                    outputs.forEach(Tensor::close);
                }
            }
        };
    }

    @Override
    public String toString() {
        return "AttentionBackwardSpec(" + forward + ")";
    }
}
