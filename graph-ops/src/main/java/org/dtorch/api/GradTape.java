package org.dtorch.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.autograd.Derivative;
import org.dtorch.autograd.Derivatives;
import org.dtorch.autograd.SavedForward;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.RedistributeAllSpec;
import org.dtorch.ops.RedistributeSpec;
import org.dtorch.ops.aten.AtenCall;

/**
 * Reverse-mode autograd of distributed tensors: the tape of one runtime. Every operator the program issues through
 * {@link DTorch#applyMulti} (and so through {@link DTorch#aten} and every {@link DTensor} method) is recorded here when
 * grad mode is on and one of its inputs requires grad: the node keeps the inputs and outputs the derivative needs and
 * the derivative itself ({@link Derivatives}). Operators that an operator adds for itself (implicit redistributions,
 * view bookkeeping) are not recorded: the program's operator is the unit, so the gradient of an implicit move comes out
 * of the backward operators' own placement choices.
 *
 * <p>A backward pass walks the nodes that lead to the roots in reverse recording order (recording order is a topological
 * order, as the program issued the operators one after another) and issues each derivative as ordinary distributed
 * operators, which take the same sharding strategies and implicit redistributions as forward operators. A leaf's
 * gradient is moved to the leaf's mesh and placements ({@code P(sum)} as {@code R}) in batched operators, so the partial
 * sums of a data-parallel gradient are all-reduced in buckets: a bucket's moves are issued during the pass, as soon as
 * its gradients are final ({@link GradBuckets}), and the rest at its end.
 * Before anything is issued, every node of the pass is checked to have a derivative: the error names the operator.
 *
 * <p>A tensor's gradient hooks ({@link #registerHook}) see its gradient once it is complete: a leaf's on the leaf's mesh
 * and placements at the end of the pass, another tensor's right before it flows into the operator that made it; a hook's
 * result replaces the gradient. With {@code createGraph} the pass records its own operators as the forward does, so the
 * gradients it returns have a graph of their own and can be differentiated again.
 *
 * <p>Grad mode is libtorch's thread-local switch ({@link GradMode}), which the Python shim's {@code torch.no_grad} and
 * {@code inference_mode} set, so one switch serves torch and distributed tensors.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
public final class GradTape {
    /**
     * The system property that switches the saving forwards off ({@code false}): recorded operators then run as the
     * program issued them and their derivatives compute again what those forwards would have kept. For measurements.
     */
    static final String SAVED_FORWARDS_PROPERTY = "dtorch.autograd.savedForwards";
    private static final boolean SAVED_FORWARDS = Boolean.parseBoolean(System.getProperty(SAVED_FORWARDS_PROPERTY, "true"));
    private final DTorch runtime;
    /** Above 0 while an operator issued by the program adds operators of its own, which are not recorded. */
    private int depth;
    private long nextSeq;
    /** Every tensor the operators of the running backward pass made (null between passes), released at its end. */
    private List<DTensor> made;
    /** The nodes the running pass recorded (with createGraph; null otherwise): their saved tensors outlive the pass. */
    private List<Node> passNodes;
    /** True while a backward pass runs that keeps its nodes' saved tensors for another ({@code retain_graph}). */
    private boolean retaining;
    /** The tensors of the running pass that hooks saw or returned: the program may keep them, so the pass does not close them. */
    private Set<DTensor> exposed;

    GradTape(DTorch runtime) {
        this.runtime = runtime;
    }

    /** One recorded operator. Not thread-safe: the client thread. */
    static final class Node {
        final String name;
        final long seq;
        final Derivative derivative;
        final boolean[] needs;
        /** True for a redistribution, whose output backward can make again from its saved input. */
        final boolean redistribution;
        DTensor[] inputs;
        DTensor[] outputs;
        /** What the forward kept for the derivative beside its inputs and outputs ({@link SavedForward#kept}). */
        private List<DTensor> kept;

        Node(String name, long seq, Derivative derivative, DTensor[] inputs, DTensor[] outputs, boolean[] needs, boolean redistribution,
             List<DTensor> kept) {
            this.name = name;
            this.redistribution = redistribution;
            this.seq = seq;
            this.derivative = derivative;
            this.inputs = inputs;
            this.outputs = outputs;
            this.needs = needs;
            this.kept = kept;
        }

        /**
         * Drops the saved tensors (backward without retain_graph); the program's own handles stay open. What the forward
         * kept for the derivative alone is the tape's, closed here.
         */
        void free() {
            inputs = null;
            outputs = null;
            kept.forEach(DTensor::close);
            kept = List.of();
        }
    }

    // ---- grad mode ---------------------------------------------------------------------------------------------

    /** True when operators on tensors that require grad are recorded on this thread. */
    public boolean isGradEnabled() {
        return GradMode.is_enabled();
    }

    /** Switches recording on or off for this thread. */
    public void setGradEnabled(boolean enabled) {
        GradMode.set_enabled(enabled);
    }

    /** Switches recording off until the returned scope closes (on this thread), which restores the mode it found. */
    public Scope noGrad() {
        boolean was = GradMode.is_enabled();
        GradMode.set_enabled(false);
        return () -> GradMode.set_enabled(was);
    }

    /** A grad-mode scope. Not thread-safe: closed on the thread that opened it. */
    @FunctionalInterface
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    // ---- recording ---------------------------------------------------------------------------------------------

    /** Runs {@code body}, the program's operator {@code spec} on {@code inputs}, and records it if it needs to be. */
    List<DTensor> recorded(OpSpec spec, DTensor[] inputs, Supplier<List<DTensor>> body) {
        if (depth > 0) {
            List<DTensor> outputs = body.get();
            if (made != null) {
                made.addAll(outputs);
            }
            return outputs;
        }
        depth++;
        List<DTensor> outputs;
        SavedForward saved;
        try {
            // Only ATen operators keep more; the cheap test first, as this runs for every operator the program issues.
            saved = SAVED_FORWARDS && spec instanceof AtenSpec && recording(inputs) ? Derivatives.savingForward(spec, inputs) : null;
            outputs = saved != null ? saved.outputs() : body.get();
        } finally {
            depth--;
        }
        if (made != null) {
            made.addAll(outputs); // a pass with createGraph issues its derivatives at depth 0, recorded
        }
        if (saved != null) {
            record(spec.name(), inputs, outputs, saved::derivative, false, saved.kept());
        } else {
            record(spec.name(), inputs, outputs, () -> Derivatives.of(spec, inputs, outputs), spec instanceof RedistributeSpec, List.of());
        }
        return outputs;
    }

    /**
     * Records {@code outputs} as made from {@code inputs} by an operator whose derivative the program gives: a custom
     * function ({@code torch.autograd.Function}), whose forward ran unrecorded. The gradients a pass hands
     * {@code derivative} and the ones it returns are the program's to keep (the pass does not close them), as a hook's
     * are. Nothing is recorded when grad mode is off or no input requires grad.
     *
     * @throws IllegalArgumentException when an output already has a history or requires grad (an input returned as it
     *                                  is, say), before anything is recorded
     */
    public void recordFunction(String name, DTensor[] inputs, List<DTensor> outputs, Derivative derivative) {
        Objects.requireNonNull(derivative, "recordFunction: the derivative is null");
        for (DTensor out : outputs) {
            if (Objects.requireNonNull(out, "recordFunction: an output is null").autograd().requiresGrad) {
                throw new IllegalArgumentException(name + ": output " + out + " already requires grad; a custom function's outputs "
                    + "are new tensors its forward made (return a view or a copy of an input, not the input itself)");
            }
        }
        record(name, inputs, outputs, () -> (in, out, g, n) -> {
            exposed.addAll(Arrays.asList(g));
            DTensor[] result = derivative.apply(in, out, g, n);
            for (DTensor r : result) {
                if (r != null) {
                    exposed.add(r);
                }
            }
            return result;
        }, false, List.of());
    }

    /**
     * True while a backward pass runs that keeps the saved tensors of the nodes it goes through ({@code retain_graph}):
     * a derivative that runs a graph the devices keep (attention's) keeps it too, and frees it otherwise.
     */
    public boolean retainsGraph() {
        return retaining;
    }

    /** True when an operator on {@code inputs} is recorded: grad mode is on and one of them requires grad. */
    private static boolean recording(DTensor[] inputs) {
        if (inputs == null || !GradMode.is_enabled()) {
            return false;
        }
        for (DTensor t : inputs) {
            if (t != null && t.autograd().requiresGrad) {
                return true;
            }
        }
        return false;
    }

    /** Runs {@code body}, whose operators are not recorded (writes, bookkeeping). */
    <T> T untracked(Supplier<T> body) {
        depth++;
        try {
            return body.get();
        } finally {
            depth--;
        }
    }

    private void record(String name, DTensor[] inputs, List<DTensor> outputs, Supplier<Derivative> derivative, boolean redistribution,
                        List<DTensor> kept) {
        if (inputs == null || !GradMode.is_enabled()) {
            return;
        }
        boolean[] needs = new boolean[inputs.length];
        boolean any = false;
        for (int i = 0; i < inputs.length; i++) {
            needs[i] = inputs[i] != null && inputs[i].autograd().requiresGrad;
            any |= needs[i];
        }
        if (!any || outputs.isEmpty()) {
            return;
        }
        Node node = new Node(name, nextSeq++, derivative.get(), inputs.clone(), outputs.toArray(DTensor[]::new), needs,
            redistribution, kept);
        if (passNodes != null) {
            passNodes.add(node);
        }
        for (DTensor out : outputs) {
            if (isDifferentiable(out.dtype())) {
                out.autograd().requiresGrad = true;
                out.autograd().gradFn = node;
            }
        }
    }

    /**
     * Refuses an in-place write while grad mode is on into or from a tensor that requires grad: the tape records
     * operators out of place only, and a write would leave recorded values stale.
     */
    void checkWrite(String op, DTensor... tensors) {
        if (!GradMode.is_enabled()) {
            return;
        }
        for (DTensor t : tensors) {
            if (t != null && t.autograd().requiresGrad) {
                throw new UnsupportedOperationException(op + ": an in-place write into or from a distributed tensor that requires grad is not "
                    + "recorded by autograd; write under no_grad (torch.no_grad()), or use the out-of-place operator");
            }
        }
    }

    static boolean isDifferentiable(ScalarType dtype) {
        return switch (dtype) {
            case Float, Double, Half, BFloat16, ComplexFloat, ComplexDouble -> true;
            default -> false;
        };
    }

    // ---- released gathers ------------------------------------------------------------------------------------------

    /**
     * Releases the workers' memory of {@code gathered} now, although recorded operators saved it for their derivatives:
     * a backward pass re-issues the redistribution that made it right before the first derivative that reads it and
     * releases that copy after the last one. This is how a fully sharded module frees its all-gathered parameters after
     * its forward and gathers them again for its backward. The tensor's handle stays the graph's identity (gradients
     * still flow through it); its values are gone, so the program must not read it again.
     *
     * <p>A tensor that no recorded operator made (a gather under {@code no_grad}) is simply closed: nothing will read it.
     *
     * @throws IllegalArgumentException when a recorded operator other than a redistribution made {@code gathered}, or its
     *                                  source was freed by a backward pass, before anything is released
     */
    public void releaseUntilBackward(DTensor gathered) {
        Objects.requireNonNull(gathered, "releaseUntilBackward: the tensor is null");
        Node node = gathered.autograd().gradFn;
        if (node == null) {
            gathered.close();
            return;
        }
        if (!node.redistribution || node.inputs == null) {
            throw new IllegalArgumentException("releaseUntilBackward: " + gathered + " came out of " + node.name + (node.inputs == null
                ? ", whose saved tensors an earlier backward freed" : ", not out of a redistribution that backward could repeat"));
        }
        if (gathered.storage() == node.inputs[0].storage()) {
            return; // the move kept the source's memory: releasing it would free nothing
        }
        gathered.autograd().released = true;
        gathered.close();
    }

    /**
     * The released gathers of one backward pass: each is redistributed again from its source before the first node that
     * reads it, and that copy is closed after the last one, so a pass holds one module's gathered parameters at a time.
     */
    private final class Regathers {
        private final Map<DTensor, Integer> readsLeft = new IdentityHashMap<>();
        private final Map<DTensor, DTensor> copies = new IdentityHashMap<>();
        /** False when the pass records its operators: they save the copies for a later pass, which must find them open. */
        private final boolean closeCopies;

        Regathers(List<Node> nodes, boolean closeCopies) {
            this.closeCopies = closeCopies;
            for (Node node : nodes) {
                for (DTensor in : node.inputs) {
                    if (in != null && in.autograd().released) {
                        readsLeft.merge(in, 1, Integer::sum);
                    }
                }
            }
        }

        /** The node's inputs with every released one replaced by its gathered copy (made on first use). */
        DTensor[] inputs(Node node) {
            if (readsLeft.isEmpty()) {
                return node.inputs;
            }
            DTensor[] out = node.inputs.clone();
            for (int i = 0; i < out.length; i++) {
                DTensor t = out[i];
                if (t != null && t.autograd().released) {
                    out[i] = copies.computeIfAbsent(t, r -> {
                        DTensor source = r.autograd().gradFn.inputs[0];
                        return source.redistribute(r.mesh(), r.placements().toArray(Placement[]::new));
                    });
                }
            }
            return out;
        }

        /** Closes the copies the node read last. */
        void done(Node node) {
            if (readsLeft.isEmpty()) {
                return;
            }
            for (DTensor in : node.inputs) {
                if (in != null && in.autograd().released && readsLeft.merge(in, -1, Integer::sum) == 0) {
                    readsLeft.remove(in);
                    DTensor copy = copies.remove(in);
                    if (copy != null && closeCopies) {
                        copy.close();
                    }
                }
            }
        }
    }

    // ---- hooks and retained gradients ----------------------------------------------------------------------------

    /**
     * The handle of one gradient hook: {@link #remove()} takes it off its tensor. Not thread-safe: the client thread.
     */
    public static final class HookHandle {
        private final DTensor tensor;

        HookHandle(DTensor tensor) {
            this.tensor = tensor;
        }

        /** Takes the hook off; idempotent. */
        public void remove() {
            AutogradState s = tensor.autograd();
            if (s.hooks != null) {
                s.hooks.remove(this);
            }
            if (s.postAccumulateHooks != null) {
                s.postAccumulateHooks.remove(this);
            }
        }
    }

    /**
     * Calls {@code hook} with the leaf {@code t} each time a backward pass has accumulated a gradient into its
     * {@code grad} (PyTorch's {@code register_post_accumulate_grad_hook}: an optimizer can step the parameter there and
     * free its gradient); {@link #grad} passes, which accumulate nothing, do not call it.
     *
     * @throws IllegalArgumentException for a tensor that is not a leaf or does not require grad
     */
    public HookHandle registerPostAccumulateGradHook(DTensor t, Consumer<DTensor> hook) {
        Objects.requireNonNull(hook, "registerPostAccumulateGradHook: the hook is null");
        AutogradState s = t.autograd();
        if (s.gradFn != null) {
            throw new IllegalArgumentException("post accumulate grad hooks cannot be registered on non-leaf tensors");
        }
        if (!s.requiresGrad) {
            throw new IllegalArgumentException("cannot register a hook on a tensor that doesn't require gradient");
        }
        if (s.postAccumulateHooks == null) {
            s.postAccumulateHooks = new LinkedHashMap<>();
        }
        HookHandle handle = new HookHandle(t);
        s.postAccumulateHooks.put(handle, hook);
        return handle;
    }

    /**
     * Calls {@code hook} with the gradient of {@code t} each time a backward pass (or {@code grad}) computes it, before
     * it is accumulated into a leaf or flows into the operator that made {@code t}; a non-null result replaces the
     * gradient and must have its shape and dtype. Hooks run in registration order, each on the previous one's result.
     *
     * @throws IllegalStateException when {@code t} does not require grad
     */
    public HookHandle registerHook(DTensor t, UnaryOperator<DTensor> hook) {
        Objects.requireNonNull(hook, "register_hook: the hook is null");
        if (!Objects.requireNonNull(t, "register_hook: the tensor is null").autograd().requiresGrad) {
            throw new IllegalStateException("cannot register a hook on a tensor that doesn't require gradient: " + t);
        }
        HookHandle handle = new HookHandle(t);
        t.autograd().hooks().put(handle, hook);
        return handle;
    }

    /**
     * Keeps the gradient of {@code t}, which a recorded operator made, in its {@code grad} after each backward pass
     * (accumulating, as a leaf's does). Nothing changes for a leaf, which keeps its gradient anyway.
     *
     * @throws IllegalStateException when {@code t} does not require grad
     */
    public void retainGrad(DTensor t) {
        AutogradState s = Objects.requireNonNull(t, "retain_grad: the tensor is null").autograd();
        if (!s.requiresGrad) {
            throw new IllegalStateException("can't retain_grad on Tensor that has requires_grad=False: " + t);
        }
        if (s.gradFn != null) {
            s.retainsGrad = true;
        }
    }

    /** True for a tensor that is not a leaf and keeps its gradient ({@link #retainGrad}). */
    public boolean retainsGrad(DTensor t) {
        return t.autograd().retainsGrad;
    }

    /** {@code g}, the complete gradient of {@code t}, through {@code t}'s hooks. */
    private DTensor hooked(DTensor t, DTensor g) {
        Map<HookHandle, UnaryOperator<DTensor>> hooks = t.autograd().hooks;
        if (hooks == null || hooks.isEmpty()) {
            return g;
        }
        DTensor out = g;
        for (UnaryOperator<DTensor> hook : List.copyOf(hooks.values())) {
            exposed.add(out);
            DTensor r = hook.apply(out);
            if (r == null) {
                continue;
            }
            if (!Arrays.equals(r.shape(), out.shape()) || r.dtype() != out.dtype()) {
                throw new IllegalArgumentException("hook of " + t + " returned a gradient of " + r.dtype() + Arrays.toString(r.shape())
                    + " for one of " + out.dtype() + Arrays.toString(out.shape()) + "; a hook keeps the gradient's shape and dtype");
            }
            exposed.add(r);
            out = r;
        }
        return out;
    }

    // ---- the state of one tensor ---------------------------------------------------------------------------------

    void setRequiresGrad(DTensor t, boolean requiresGrad) {
        AutogradState s = t.autograd();
        if (!requiresGrad && s.gradFn != null) {
            throw new IllegalStateException("requires_grad_(False): " + t + " is not a leaf (it came out of " + s.gradFn.name
                + "); detach() it instead");
        }
        if (requiresGrad && !isDifferentiable(t.dtype())) {
            throw new IllegalArgumentException("only tensors of floating point and complex dtype can require gradients, got " + t);
        }
        s.requiresGrad = requiresGrad;
    }

    void setGrad(DTensor t, DTensor grad) {
        if (grad != null) {
            if (!Arrays.equals(grad.shape(), t.shape())) {
                throw new IllegalArgumentException("assigned grad has data of a different size: " + Arrays.toString(grad.shape()) + " for "
                    + t);
            }
            if (grad.dtype() != t.dtype()) {
                throw new IllegalArgumentException("assigned grad has data of a different type: " + grad.dtype() + " for " + t);
            }
        }
        t.autograd().grad = grad;
    }

    /** A tensor of {@code t}'s values and memory that no recorded operation made and that does not require grad. */
    DTensor detach(DTensor t) {
        return untracked(() -> runtime.aten(AtenCall.of("alias", "T", (Object) null), t).getFirst());
    }

    // ---- backward ------------------------------------------------------------------------------------------------

    /**
     * Accumulates the gradients of {@code roots} (seeded with {@code grads}; a null element is 1 for a one-element root)
     * into the {@code grad} of every leaf they depend on, or of {@code inputs} only when not empty.
     *
     * @throws UnsupportedOperationException naming the first operator on the way that has no derivative, before
     *                                       anything is issued
     */
    public void backward(List<DTensor> roots, List<DTensor> grads, boolean retainGraph, List<DTensor> inputs) {
        backward(roots, grads, retainGraph, false, inputs);
    }

    /**
     * {@link #backward(List, List, boolean, List)}, and with {@code createGraph} the pass is recorded: the accumulated
     * gradients have a graph of their own (accumulation is then out of place), for higher derivatives. Tensors that
     * retain their gradient ({@link #retainGrad}) get it too.
     */
    public void backward(List<DTensor> roots, List<DTensor> grads, boolean retainGraph, boolean createGraph, List<DTensor> inputs) {
        Map<DTensor, DTensor> retained = new LinkedHashMap<>();
        Map<DTensor, DTensor> leaves = run(roots, grads, retainGraph, createGraph, inputs.isEmpty() ? null : identitySet(inputs), retained);
        accumulate(leaves, createGraph);
        accumulate(retained, createGraph);
        for (DTensor leaf : leaves.keySet()) {
            Map<HookHandle, Consumer<DTensor>> hooks = leaf.autograd().postAccumulateHooks;
            if (hooks != null) {
                for (Consumer<DTensor> hook : List.copyOf(hooks.values())) {
                    hook.accept(leaf);
                }
            }
        }
    }

    private void accumulate(Map<DTensor, DTensor> grads, boolean createGraph) {
        for (Map.Entry<DTensor, DTensor> e : grads.entrySet()) {
            AutogradState s = e.getKey().autograd();
            DTensor g = e.getValue();
            if (s.grad == null) {
                s.grad = g;
            } else if (createGraph) {
                s.grad = s.grad.add(g);
            } else if (s.grad.requiresGrad()) {
                try (Scope ignored = noGrad()) {
                    s.grad = s.grad.add(g); // a gradient with a graph is not written in place
                }
            } else {
                untracked(() -> s.grad.add_(g));
                g.close();
            }
        }
    }

    /**
     * The gradients of {@code outputs} with respect to {@code inputs}, returned rather than accumulated: one per input,
     * with the input's mesh and placements, or null for an input the outputs do not depend on.
     *
     * @throws IllegalArgumentException for an unused input unless {@code allowUnused}
     */
    public List<DTensor> grad(List<DTensor> outputs, List<DTensor> inputs, List<DTensor> gradOutputs, boolean retainGraph,
                              boolean allowUnused) {
        return grad(outputs, inputs, gradOutputs, retainGraph, false, allowUnused);
    }

    /** {@link #grad(List, List, List, boolean, boolean)}, recording the pass with {@code createGraph} (see {@link #backward}). */
    public List<DTensor> grad(List<DTensor> outputs, List<DTensor> inputs, List<DTensor> gradOutputs, boolean retainGraph,
                              boolean createGraph, boolean allowUnused) {
        for (DTensor in : inputs) {
            if (!Objects.requireNonNull(in, "grad: an input is null").autograd().requiresGrad) {
                throw new IllegalArgumentException("grad: input " + in + " does not require grad");
            }
        }
        Map<DTensor, DTensor> found = run(outputs, gradOutputs, retainGraph, createGraph, identitySet(inputs), null);
        List<DTensor> out = new ArrayList<>(inputs.size());
        for (DTensor in : inputs) {
            DTensor g = found.get(in);
            if (g == null && !allowUnused) {
                throw new IllegalArgumentException("grad: one of the differentiated tensors (" + in + ") appears to not have been used in "
                    + "the graph; pass allow_unused=True if this is the desired behavior");
            }
            out.add(g);
        }
        return out;
    }

    private static Set<DTensor> identitySet(List<DTensor> tensors) {
        Set<DTensor> set = Collections.newSetFromMap(new IdentityHashMap<>());
        set.addAll(tensors);
        return set;
    }

    /**
     * One backward pass: the gradient of every tensor of {@code targets} (or of every leaf, when null) that the roots
     * depend on, on the tensor's mesh and placements. Targets may be tensors that are not leaves: their gradients are
     * captured once complete. {@code retained} (when not null) receives the gradients of the tensors that retain theirs.
     * With {@code createGraph} grad mode stays on and the derivatives are recorded like forward operators.
     */
    private Map<DTensor, DTensor> run(List<DTensor> roots, List<DTensor> seeds, boolean retainGraph, boolean createGraph,
                                      Set<DTensor> targets, Map<DTensor, DTensor> retained) {
        List<Node> nodes = reachable(roots);
        boolean was = GradMode.is_enabled();
        GradMode.set_enabled(createGraph);
        if (!createGraph) {
            depth++;
        }
        made = new ArrayList<>();
        passNodes = createGraph ? new ArrayList<>() : null;
        retaining = retainGraph;
        exposed = Collections.newSetFromMap(new IdentityHashMap<>());
        Map<DTensor, DTensor> kept = null;
        Regathers regathers = new Regathers(nodes, !createGraph);
        try {
            Map<DTensor, DTensor> grads = new IdentityHashMap<>();
            Map<DTensor, DTensor> leafGrads = new LinkedHashMap<>();
            for (int i = 0; i < roots.size(); i++) {
                DTensor root = roots.get(i);
                DTensor seed = seed(root, i < seeds.size() ? seeds.get(i) : null);
                flow(root, seed, grads, leafGrads, targets);
            }
            GradBuckets early = GradBuckets.of(runtime, nodes, !createGraph);
            if (early != null) {
                early.seeded(leafGrads);
            }
            for (Node node : nodes) {
                DTensor[] gradOutputs = new DTensor[node.outputs.length];
                boolean any = false;
                for (int o = 0; o < gradOutputs.length; o++) {
                    DTensor g = grads.remove(node.outputs[o]);
                    gradOutputs[o] = g == null ? null : completed(node.outputs[o], g, targets, leafGrads, retained);
                    any |= gradOutputs[o] != null;
                }
                if (!any) {
                    regathers.done(node); // no gradient reached it: its reads of released gathers are over
                    if (early != null) {
                        early.processed(node, node.inputs, leafGrads);
                    }
                    continue;
                }
                for (int o = 0; o < gradOutputs.length; o++) {
                    if (gradOutputs[o] == null) {
                        DTensor out = node.outputs[o];
                        gradOutputs[o] = runtime.zeros(out.shape(), out.dtype(), out.mesh(), wholePlacements(out.placements()));
                    }
                }
                DTensor[] gradInputs = node.derivative.apply(regathers.inputs(node), node.outputs, gradOutputs, node.needs);
                regathers.done(node);
                for (int i = 0; i < node.inputs.length; i++) {
                    if (node.needs[i] && gradInputs[i] != null) {
                        flow(node.inputs[i], gradInputs[i], grads, leafGrads, targets);
                    }
                }
                if (early != null) {
                    early.processed(node, node.inputs, leafGrads); // moves the gradients this node completed, a bucket at a time
                }
                if (!retainGraph) {
                    node.free();
                }
            }
            Map<DTensor, DTensor> placed = toLeafPlacements(leafGrads, !createGraph, early);
            for (Map.Entry<DTensor, DTensor> e : placed.entrySet()) {
                if (e.getKey().autograd().gradFn == null) {
                    e.setValue(hooked(e.getKey(), e.getValue()));
                }
            }
            kept = owned(placed, seeds);
            return kept;
        } finally {
            releaseMade(kept, retained);
            passNodes = null;
            retaining = false;
            exposed = null;
            if (!createGraph) {
                depth--;
            }
            GradMode.set_enabled(was);
        }
    }

    /** Adds gradient {@code g} of {@code t}: into the running gradients of a tensor a node made, or into a leaf target's. */
    private static void flow(DTensor t, DTensor g, Map<DTensor, DTensor> grads, Map<DTensor, DTensor> leafGrads, Set<DTensor> targets) {
        if (t.autograd().gradFn != null) {
            grads.merge(t, g, DTensor::add);
        } else if (targets == null || targets.contains(t)) {
            leafGrads.merge(t, g, DTensor::add);
        }
    }

    /**
     * {@code g}, the complete gradient of {@code t} that a node made, through its hooks: captured when {@code t} is a
     * target, and copied into {@code retained} when {@code t} retains its gradient.
     */
    private DTensor completed(DTensor t, DTensor g, Set<DTensor> targets, Map<DTensor, DTensor> leafGrads, Map<DTensor, DTensor> retained) {
        DTensor out = hooked(t, g);
        if (targets != null && targets.contains(t)) {
            leafGrads.put(t, out);
        }
        if (retained != null && t.autograd().retainsGrad) {
            retained.put(t, runtime.aten(AtenCall.of("clone", "T", (Object) null), out).getFirst());
        }
        return out;
    }

    /** The gradient seeding a root: {@code given}, or 1 for a one-element root. */
    private DTensor seed(DTensor root, DTensor given) {
        if (!root.autograd().requiresGrad) {
            throw new IllegalArgumentException("element 0 of tensors does not require grad and does not have a grad_fn: " + root);
        }
        if (given != null) {
            if (!Arrays.equals(given.shape(), root.shape())) {
                throw new IllegalArgumentException("backward: the gradient's shape " + Arrays.toString(given.shape()) + " differs from "
                    + root);
            }
            return given;
        }
        long numel = 1;
        for (long s : root.shape()) {
            numel *= s;
        }
        if (numel != 1) {
            throw new IllegalArgumentException("grad can be implicitly created only for scalar outputs; " + root + " needs a gradient "
                + "argument");
        }
        return runtime.ones(root.shape(), root.dtype(), root.mesh(), wholePlacements(root.placements()));
    }

    /** The nodes the roots depend on, latest first; checked to have derivatives and saved tensors before anything runs. */
    private List<Node> reachable(List<DTensor> roots) {
        Set<Node> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        List<Node> stack = new ArrayList<>();
        for (DTensor root : roots) {
            Node n = Objects.requireNonNull(root, "backward: a tensor is null").autograd().gradFn;
            if (n != null && seen.add(n)) {
                stack.add(n);
            }
        }
        List<Node> out = new ArrayList<>();
        while (!stack.isEmpty()) {
            Node n = stack.removeLast();
            out.add(n);
            if (n.inputs == null) {
                throw new IllegalStateException("Trying to backward through the graph a second time (or directly access saved tensors "
                    + "after they have already been freed): " + n.name + " was freed by an earlier backward; pass retain_graph=True to "
                    + "the first");
            }
            if (n.derivative == null) {
                throw new UnsupportedOperationException("backward: the derivative of " + n.name + " on distributed tensors is not "
                    + "implemented yet (nothing was run); see docs/training.md for the operators that have one");
            }
            for (int i = 0; i < n.inputs.length; i++) {
                Node m = n.needs[i] ? n.inputs[i].autograd().gradFn : null;
                if (m != null && seen.add(m)) {
                    stack.add(m);
                }
            }
        }
        out.sort(Comparator.comparingLong((Node n) -> n.seq).reversed());
        return out;
    }

    /**
     * Every gradient moved to its tensor's mesh, placements ({@code P} as {@code R}) and dtype: with {@code batched} the
     * moves on one mesh run as one batched operator, whose all-reduces of partial sums go together; otherwise one
     * redistribution each, which a recorded pass can differentiate again. The gradients {@code early} moved during the
     * pass (when not null) are taken as they are.
     */
    private Map<DTensor, DTensor> toLeafPlacements(Map<DTensor, DTensor> leafGrads, boolean batched, GradBuckets early) {
        Map<DTensor, DTensor> out = new LinkedHashMap<>();
        Map<DeviceMesh, List<DTensor>> moving = new LinkedHashMap<>();
        boolean reduce = !batched || GradBuckets.reducesGradients();
        for (Map.Entry<DTensor, DTensor> e : leafGrads.entrySet()) {
            DTensor t = e.getKey();
            DTensor movedEarly = early == null ? null : early.moved(t);
            if (movedEarly != null) {
                out.put(t, movedEarly);
                continue;
            }
            DTensor g = e.getValue();
            if (g.dtype() != t.dtype()) {
                g = g.to(t.dtype());
            }
            out.put(t, g);
            if (reduce && !g.meta().sharding().equals(gradSharding(t))) {
                moving.computeIfAbsent(g.mesh(), m -> new ArrayList<>()).add(t);
            }
        }
        for (List<DTensor> group : moving.values()) {
            List<Sharding> targets = new ArrayList<>();
            DTensor[] sources = new DTensor[group.size()];
            boolean sameMesh = true;
            for (int i = 0; i < sources.length; i++) {
                sources[i] = out.get(group.get(i));
                Sharding target = gradSharding(group.get(i));
                sameMesh &= target.mesh().equals(sources[i].mesh());
                targets.add(target);
            }
            if (sameMesh && batched) {
                List<DTensor> moved = runtime.applyMulti(RedistributeAllSpec.gradientBucket(targets), sources);
                for (int i = 0; i < sources.length; i++) {
                    out.put(group.get(i), moved.get(i));
                }
            } else {
                for (int i = 0; i < sources.length; i++) {
                    Sharding target = targets.get(i);
                    out.put(group.get(i), sources[i].redistribute(target.mesh(), target.placements().toArray(Placement[]::new)));
                }
            }
        }
        return out;
    }

    /**
     * The gradients, each a tensor of its own that backward made: one that is a given seed, the gradient of two
     * tensors, a view that follows another tensor, or memory another gradient shares is copied ({@code clone}), so that
     * in-place writes into one {@code grad} (accumulation, {@code zero_()}, clipping) reach no other tensor.
     */
    private Map<DTensor, DTensor> owned(Map<DTensor, DTensor> grads, List<DTensor> seeds) {
        Set<DTensor> ours = Collections.newSetFromMap(new IdentityHashMap<>());
        ours.addAll(made);
        ours.removeAll(exposed);
        Map<Storage, Integer> uses = new IdentityHashMap<>();
        for (DTensor seed : seeds) {
            if (seed != null) {
                uses.merge(seed.storage(), 2, Integer::sum);
            }
        }
        Set<DTensor> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
        for (DTensor g : grads.values()) {
            if (distinct.add(g)) {
                uses.merge(g.storage(), 1, Integer::sum);
            }
        }
        Set<DTensor> taken = Collections.newSetFromMap(new IdentityHashMap<>());
        Map<DTensor, DTensor> out = new LinkedHashMap<>();
        for (Map.Entry<DTensor, DTensor> e : grads.entrySet()) {
            DTensor g = e.getValue();
            boolean shared = !ours.contains(g) || g.storage().derivation() != null || uses.get(g.storage()) > 1 || !taken.add(g);
            out.put(e.getKey(), shared ? runtime.aten(AtenCall.of("clone", "T", (Object) null), g).getFirst() : g);
        }
        return out;
    }

    /**
     * Releases what the pass made except the gradients it hands over ({@code kept}'s and {@code retained}'s values; none
     * when it failed), the tensors hooks saw, and the tensors the nodes it recorded saved (the recorded graph owns those).
     */
    private void releaseMade(Map<DTensor, DTensor> kept, Map<DTensor, DTensor> retained) {
        List<DTensor> all = made;
        made = null;
        Set<DTensor> keep = Collections.newSetFromMap(new IdentityHashMap<>());
        if (kept != null) {
            keep.addAll(kept.values());
            if (retained != null) {
                keep.addAll(retained.values());
            }
        }
        keep.addAll(exposed);
        if (passNodes != null) {
            for (Node n : passNodes) {
                keep.addAll(Arrays.asList(n.inputs));
                keep.addAll(Arrays.asList(n.outputs));
            }
        }
        for (DTensor t : all) {
            if (!keep.contains(t)) {
                t.close();
            }
        }
    }

    static Sharding gradSharding(DTensor t) {
        return new Sharding(t.mesh(), List.of(wholePlacements(t.placements())));
    }

    /** {@code placements} with every partial placement replaced by {@code R}: where a gradient holds whole values. */
    static Placement[] wholePlacements(List<Placement> placements) {
        Placement[] out = new Placement[placements.size()];
        for (int i = 0; i < out.length; i++) {
            Placement p = placements.get(i);
            out[i] = p.isPartial() ? Placement.replicate() : p;
        }
        return out;
    }
}
