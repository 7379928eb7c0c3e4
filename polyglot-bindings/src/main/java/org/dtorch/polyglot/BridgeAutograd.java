package org.dtorch.polyglot;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.GradTape;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * Autograd of distributed tensors for Python's {@code dtorch.Tensor} ({@code requires_grad}, {@code grad},
 * {@code backward}, {@code torch.autograd.grad}): each method maps onto the runtime's {@link GradTape} or the per-tensor
 * state of {@link DTensor}. Grad mode is libtorch's thread-local switch, which the {@code torch} shim's {@code no_grad}
 * and {@code inference_mode} already set, so it has no method here.
 *
 * <p>Not thread-safe: the Python client thread that owns the runtime.
 */
public final class BridgeAutograd {
    private final DTorch runtime;

    BridgeAutograd(DTorch runtime) {
        this.runtime = runtime;
    }

    /** True when operators that take {@code t} are recorded. */
    @HostAccess.Export
    public boolean requiresGrad(DTensor t) {
        return t.requiresGrad();
    }

    /** Makes the leaf {@code t} require grad, or not. */
    @HostAccess.Export
    public void setRequiresGrad(DTensor t, boolean requiresGrad) {
        t.requiresGrad_(requiresGrad);
    }

    /** The gradient accumulated into {@code t}, or null. */
    @HostAccess.Export
    public DTensor grad(DTensor t) {
        return t.grad();
    }

    /** Replaces (or clears, with null) the gradient of {@code t}. */
    @HostAccess.Export
    public void setGrad(DTensor t, DTensor grad) {
        t.setGrad(grad);
    }

    /** True unless a recorded operator made {@code t}. */
    @HostAccess.Export
    public boolean isLeaf(DTensor t) {
        return t.isLeaf();
    }

    /** The name of the recorded operator that made {@code t}, or null. */
    @HostAccess.Export
    public String gradFn(DTensor t) {
        return t.gradFn();
    }

    /** {@code t}'s values and memory without history. */
    @HostAccess.Export
    public DTensor detach(DTensor t) {
        return t.detach();
    }

    /**
     * Accumulates the gradients of {@code tensors} (seeded with {@code grads}, None for a one-element tensor's 1) into
     * the leaves, or into {@code inputs} only when not empty.
     */
    @HostAccess.Export
    public void backward(Value tensors, Value grads, boolean retainGraph, boolean createGraph, Value inputs) {
        runtime.autograd().backward(handles(tensors), handles(grads), retainGraph, createGraph, handles(inputs));
    }

    /** The gradients of {@code outputs} with respect to {@code inputs}, one per input (null for an unused one). */
    @HostAccess.Export
    public DTensor[] gradients(Value outputs, Value inputs, Value gradOutputs, boolean retainGraph, boolean createGraph,
                               boolean allowUnused) {
        return runtime.autograd().grad(handles(outputs), handles(inputs), handles(gradOutputs), retainGraph, createGraph, allowUnused)
            .toArray(DTensor[]::new);
    }

    /**
     * Registers {@code hook}, a Python callable of one distributed tensor that returns one or None, as a gradient hook of
     * {@code t} ({@link GradTape#registerHook}); the returned handle goes back to {@link #removeHook}.
     */
    @HostAccess.Export
    public Object registerHook(DTensor t, Value hook) {
        if (hook == null || !hook.canExecute()) {
            throw new IllegalArgumentException("register_hook: the hook must be callable, got " + hook);
        }
        return runtime.autograd().registerHook(t, g -> {
            Value result = hook.execute(g);
            if (result.isNull()) {
                return null;
            }
            if (result.isHostObject() && result.asHostObject() instanceof DTensor r) {
                return r;
            }
            throw new IllegalArgumentException("a hook of " + t + " must return a distributed tensor or None, got " + result);
        });
    }

    /**
     * Records {@code outputs} as made from {@code inputs} by a custom function ({@code torch.autograd.Function}) whose
     * {@code backward}, a Python callable, takes the list of the outputs' gradients and returns one gradient or None per
     * input ({@link GradTape#recordFunction}).
     */
    @HostAccess.Export
    public void recordFunction(String name, Value inputs, Value outputs, Value backward) {
        if (backward == null || !backward.canExecute()) {
            throw new IllegalArgumentException(name + ": backward must be callable, got " + backward);
        }
        DTensor[] in = handles(inputs).toArray(DTensor[]::new);
        runtime.autograd().recordFunction(name, in, handles(outputs), (ins, outs, grads, needs) -> {
            Value result = backward.execute((Object) grads.clone());
            List<DTensor> given = handles(result);
            if (given.size() != ins.length) {
                throw new IllegalStateException(name + ": backward gave " + given.size() + " gradients for " + ins.length + " inputs");
            }
            return given.toArray(DTensor[]::new);
        });
    }

    /**
     * Registers {@code hook}, a Python callable of the leaf {@code t}, to run each time a backward pass has accumulated
     * into {@code t}'s gradient ({@link GradTape#registerPostAccumulateGradHook}); the handle goes back to
     * {@link #removeHook}.
     */
    @HostAccess.Export
    public Object registerPostAccumulateGradHook(DTensor t, Value hook) {
        if (hook == null || !hook.canExecute()) {
            throw new IllegalArgumentException("register_post_accumulate_grad_hook: the hook must be callable, got " + hook);
        }
        return runtime.autograd().registerPostAccumulateGradHook(t, leaf -> hook.execute(leaf));
    }

    /** Takes off the hook of a handle {@link #registerHook} returned; idempotent. */
    @HostAccess.Export
    public void removeHook(Object handle) {
        if (!(handle instanceof GradTape.HookHandle h)) {
            throw new IllegalArgumentException("removeHook: not a hook handle: " + handle);
        }
        h.remove();
    }

    /** Keeps the gradient of {@code t}, which is not a leaf, in its {@code grad} after backward. */
    @HostAccess.Export
    public void retainGrad(DTensor t) {
        runtime.autograd().retainGrad(t);
    }

    /** True for a tensor that is not a leaf and retains its gradient. */
    @HostAccess.Export
    public boolean retainsGrad(DTensor t) {
        return runtime.autograd().retainsGrad(t);
    }

    /**
     * Releases the workers' memory of {@code gathered}, a recorded redistribution's result, until a backward pass needs
     * it again: the pass gathers it anew ({@link GradTape#releaseUntilBackward}).
     */
    @HostAccess.Export
    public void releaseUntilBackward(DTensor gathered) {
        runtime.autograd().releaseUntilBackward(gathered);
    }

    /** The handles of a Python list; None elements stay null. */
    private static List<DTensor> handles(Value list) {
        List<DTensor> out = new ArrayList<>();
        if (list == null || list.isNull()) {
            return out;
        }
        for (long i = 0; i < list.getArraySize(); i++) {
            Value e = list.getArrayElement(i);
            if (e.isNull()) {
                out.add(null);
            } else if (e.isHostObject() && e.asHostObject() instanceof DTensor t) {
                out.add(t);
            } else {
                throw new IllegalArgumentException("element " + i + " must be a distributed tensor or None, got " + e);
            }
        }
        return out;
    }
}
