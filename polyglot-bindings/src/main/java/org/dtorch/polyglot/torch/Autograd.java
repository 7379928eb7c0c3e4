package org.dtorch.polyglot.torch;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.InferenceMode;
import org.bytedeco.pytorch.Node;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.TorchTensors;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * libtorch's autograd for the Python {@code torch} package: the per-tensor state (requires_grad, grad, grad_fn, the
 * leaf flag), {@code backward}, {@code torch.autograd.grad}, and the grad-mode and inference-mode switches. Nothing
 * here derives a gradient: operators called through the dispatcher ({@link BoundCall}) record the graph themselves
 * when an input requires grad and grad mode is on, and libtorch's engine runs it backwards.
 *
 * <p>Grad mode and inference mode are libtorch's thread-local state, so they belong to the calling Java thread. A
 * GraalPy thread is one Java thread for its whole life, so a Python thread sees its own mode, as in PyTorch, and a
 * new thread starts with grad mode on. An inference-mode scope ({@link InferenceScope}) must be left on the thread
 * that entered it.
 *
 * <p>Thread-safe: every method acts on the calling thread's modes or on one tensor, whose handle synchronizes its own
 * reads; concurrent backward passes over graphs that share nodes are libtorch's to order, as in PyTorch.
 */
public final class Autograd {
    private static final Autograd SHARED = new Autograd();

    /** The inference-mode scopes entered and not yet left, innermost last, on each thread. */
    private static final ThreadLocal<ArrayList<InferenceScope>> SCOPES = ThreadLocal.withInitial(ArrayList::new);

    private Autograd() {
    }

    /** The one instance (it holds no state of its own). */
    public static Autograd shared() {
        return SHARED;
    }

    // ---- the state of one tensor ----

    /** True when autograd records operations on {@code t}. */
    @HostAccess.Export
    public boolean requiresGrad(PyTensor t) {
        return t.t().requires_grad();
    }

    /**
     * Sets whether autograd records operations on {@code t}; libtorch refuses integral dtypes and switching it off on
     * a tensor that is not a leaf.
     */
    @HostAccess.Export
    public void setRequiresGrad(PyTensor t, boolean requiresGrad) {
        t.t().requires_grad_(requiresGrad);
    }

    /** The gradient accumulated into {@code t} (a handle on the same tensor, so in-place writes reach it), or null. */
    @HostAccess.Export
    public PyTensor grad(PyTensor t) {
        Tensor grad = t.t().grad();
        if (grad == null || grad.isNull() || !grad.defined()) {
            return null;
        }
        return PyTensor.wrap(new Tensor(grad));
    }

    /**
     * Replaces the gradient of {@code t} with {@code grad}, or removes it ({@code grad} null).
     *
     * @throws IllegalStateException when {@code grad}'s shape, dtype or device differs from {@code t}'s
     */
    @HostAccess.Export
    public void setGrad(PyTensor t, PyTensor grad) {
        Tensor self = t.t();
        if (grad == null) {
            self.mutable_grad().reset();
            return;
        }
        Tensor g = grad.t();
        if (!Arrays.equals(TorchTensors.shape(g), TorchTensors.shape(self))) {
            throw new IllegalStateException("assigned grad has data of a different size: " + Arrays.toString(TorchTensors.shape(g))
                + " for a tensor of " + Arrays.toString(TorchTensors.shape(self)));
        }
        if (TorchTensors.dtype(g) != TorchTensors.dtype(self)) {
            throw new IllegalStateException("assigned grad has data of a different type: " + Dtypes.name(TorchTensors.dtype(g))
                + " for a tensor of " + Dtypes.name(TorchTensors.dtype(self)));
        }
        if (g.is_cuda() != self.is_cuda() || g.is_cuda() && TorchTensors.device(g).index() != TorchTensors.device(self).index()) {
            throw new IllegalStateException("assigned grad has data located on a different device: " + grad.device()
                + " for a tensor on " + t.device());
        }
        self.mutable_grad().put(g);
    }

    /** True for a tensor no recorded operation made: one the user made, or one that does not require grad. */
    @HostAccess.Export
    public boolean isLeaf(PyTensor t) {
        return t.t().is_leaf();
    }

    /** The name of the node that made {@code t} ({@code MulBackward0}), or null for a leaf. */
    @HostAccess.Export
    public String gradFn(PyTensor t) {
        Node node = t.t().grad_fn();
        if (node == null || node.isNull()) {
            return null;
        }
        return node.name().getString();
    }

    /** Keeps the gradient of a tensor that is not a leaf in its {@code grad} after backward. */
    @HostAccess.Export
    public void retainGrad(PyTensor t) {
        t.t().retain_grad();
    }

    /** True once {@link #retainGrad} was called on a tensor that is not a leaf. */
    @HostAccess.Export
    public boolean retainsGrad(PyTensor t) {
        return t.t().retains_grad();
    }

    /** True for a tensor made in inference mode (autograd refuses it later). */
    @HostAccess.Export
    public boolean isInference(PyTensor t) {
        return t.t().is_inference();
    }

    /**
     * {@code t.data}: the same memory as a new tensor that autograd does not track, with a version counter of its own
     * (so writes through it are not seen by the graph, as PyTorch's {@code .data}).
     */
    @HostAccess.Export
    public PyTensor data(PyTensor t) {
        return PyTensor.wrap(t.t().variable_data());
    }

    /**
     * {@code t.data = value}: {@code t} shows {@code value}'s memory, shape and dtype from now on, and keeps its
     * identity, requires_grad flag and gradient (what {@code Module.to} relies on to convert parameters in place).
     *
     * @throws IllegalStateException when a zero-copy view pins {@code t}'s memory, which this would free under it
     */
    @HostAccess.Export
    public void setData(PyTensor t, PyTensor value) {
        Tensor source = value.t(); // read before taking t's lock, so that no two handles' locks are ever held together
        synchronized (t) { // the handle's own lock: no view may pin the memory between the check and the swap
            if (t.pinCount() > 0) {
                throw new IllegalStateException("t.data = ... would free memory that " + t.pinCount()
                    + " memoryview(s) of the tensor still show; release them first");
            }
            t.t().set_data(source);
        }
    }

    // ---- backward passes ----

    /**
     * Runs libtorch's engine from {@code tensors} backwards and accumulates into the {@code grad} of the leaves (of
     * {@code inputs} only, when given).
     *
     * @param tensors      the tensors to differentiate (a Python list of handles)
     * @param grads        one gradient per tensor, None elements (or an empty list) for scalars' implicit 1
     * @param retainGraph  -1 for the default (the value of {@code createGraph}), 0 to free the graph, 1 to keep it
     * @param createGraph  true to record the backward pass itself (for higher derivatives)
     * @param inputs       the leaves to accumulate into; empty for all of them
     */
    @HostAccess.Export
    public void backward(Value tensors, Value grads, int retainGraph, boolean createGraph, Value inputs) {
        runBackward(handles(tensors, false), handles(grads, true), retainGraph, createGraph, handles(inputs, false));
    }

    /** {@link #backward} for Java callers: null elements of {@code grads} are implicit ones. */
    public void runBackward(List<PyTensor> tensors, List<PyTensor> grads, int retainGraph, boolean createGraph, List<PyTensor> inputs) {
        try (TensorVector outs = vector(tensors); TensorVector gradients = vector(grads);
             TensorVector leaves = vector(inputs); BoolOptional retain = retain(retainGraph)) {
            torch.backward(outs, gradients, retain, createGraph, leaves);
        }
    }

    /**
     * {@code torch.autograd.grad}: the gradients of {@code outputs} with respect to {@code inputs}, returned rather
     * than accumulated.
     *
     * @return one handle per input; null for an input the outputs do not depend on (only with {@code allowUnused})
     */
    @HostAccess.Export
    public PyTensor[] gradients(Value outputs, Value inputs, Value gradOutputs, int retainGraph, boolean createGraph, boolean allowUnused) {
        return computeGradients(handles(outputs, false), handles(inputs, false), handles(gradOutputs, true), retainGraph, createGraph,
            allowUnused);
    }

    /** {@link #gradients} for Java callers. */
    public PyTensor[] computeGradients(List<PyTensor> outputs, List<PyTensor> inputs, List<PyTensor> gradOutputs, int retainGraph,
                                       boolean createGraph, boolean allowUnused) {
        try (TensorVector outs = vector(outputs); TensorVector ins = vector(inputs);
             TensorVector gradients = vector(gradOutputs); BoolOptional retain = retain(retainGraph);
             TensorVector results = torch.grad(outs, ins, gradients, retain, createGraph, allowUnused)) {
            PyTensor[] out = new PyTensor[(int) results.size()];
            for (int i = 0; i < out.length; i++) {
                Tensor r = results.get(i);
                out[i] = r.defined() ? PyTensor.wrap(r) : null;
            }
            return out;
        }
    }

    private static BoolOptional retain(int retainGraph) {
        return retainGraph < 0 ? new BoolOptional() : new BoolOptional(retainGraph > 0);
    }

    /** The handles of a Python list; None elements stay null where {@code nulls} allows them. */
    private static List<PyTensor> handles(Value list, boolean nulls) {
        if (list == null || list.isNull()) {
            return List.of();
        }
        List<PyTensor> out = new ArrayList<>();
        for (long i = 0; i < list.getArraySize(); i++) {
            Value e = list.getArrayElement(i);
            if (e.isNull() && nulls) {
                out.add(null);
            } else if (e.isHostObject() && e.asHostObject() instanceof PyTensor p) {
                out.add(p);
            } else {
                throw new IllegalArgumentException("element " + i + " must be a torch tensor" + (nulls ? " or None" : "") + ", got " + e);
            }
        }
        return out;
    }

    /** The tensors of {@code handles}, an undefined tensor for each null (libtorch's "none given"). */
    private static TensorVector vector(List<PyTensor> handles) {
        TensorVector out = new TensorVector();
        try {
            for (PyTensor h : handles) {
                // push_back copies the tensor (one more reference), so the temporary handle is closed at once.
                try (Tensor t = h == null ? new Tensor() : h.torch()) {
                    out.push_back(t);
                }
            }
            return out;
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
    }

    // ---- grad mode and inference mode of the calling thread ----

    /** True when operators record for autograd on this thread. */
    @HostAccess.Export
    public boolean isGradEnabled() {
        return GradMode.is_enabled();
    }

    /** Switches recording on or off for this thread. */
    @HostAccess.Export
    public void setGradEnabled(boolean enabled) {
        GradMode.set_enabled(enabled);
    }

    /** True inside an inference-mode scope on this thread. */
    @HostAccess.Export
    public boolean isInferenceModeEnabled() {
        return InferenceMode.is_enabled();
    }

    /**
     * Enters libtorch's inference mode ({@code enabled}) or leaves it for a nested scope ({@code !enabled}) on this
     * thread, until {@link InferenceScope#close()} on the same thread.
     */
    @HostAccess.Export
    public InferenceScope enterInferenceMode(boolean enabled) {
        InferenceScope scope = new InferenceScope(new InferenceMode(enabled));
        SCOPES.get().add(scope);
        return scope;
    }

    /**
     * Puts this thread's modes back to a fresh thread's: grad mode on and no inference-mode scope (any still open is
     * left, innermost first). A script's {@code import torch} calls it, so that a thread that ran an earlier script
     * left with grad mode off does not pass that on.
     */
    @HostAccess.Export
    public void resetThread() {
        ArrayList<InferenceScope> open = SCOPES.get();
        while (!open.isEmpty()) {
            open.get(open.size() - 1).close();
        }
        GradMode.set_enabled(true);
    }

    /**
     * One inference-mode scope of one thread: closing it restores the modes it found. Not thread-safe: it is closed on
     * the thread that opened it, innermost scope first.
     */
    public static final class InferenceScope implements AutoCloseable {
        private final Thread owner = Thread.currentThread();
        private InferenceMode guard;

        private InferenceScope(InferenceMode guard) {
            this.guard = guard;
        }

        /**
         * Restores the modes this scope found. Idempotent.
         *
         * @throws IllegalStateException on another thread than the one that entered it, or out of nesting order
         */
        @HostAccess.Export
        @Override
        public void close() {
            if (guard == null) {
                return;
            }
            if (Thread.currentThread() != owner) {
                throw new IllegalStateException("an inference_mode scope is left on the thread that entered it (" + owner.getName()
                    + "), not on " + Thread.currentThread().getName());
            }
            ArrayList<InferenceScope> open = SCOPES.get();
            if (open.isEmpty() || open.get(open.size() - 1) != this) {
                throw new IllegalStateException("inference_mode scopes are left innermost first; an inner scope is still open");
            }
            open.remove(open.size() - 1);
            InferenceMode g = guard;
            guard = null;
            g.close();
        }
    }
}
