package org.dtorch.api;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;

/**
 * The autograd state of one {@link DTensor}: whether operations on it are recorded, the node that made it (null for a
 * leaf), which of that node's outputs it is, and the gradient accumulated into it (leaves only).
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class AutogradState {
    /** True when the tape records operations that take this tensor. */
    boolean requiresGrad;
    /** The recorded operation whose output this tensor is; null for a leaf. */
    GradTape.Node gradFn;
    /** The gradient accumulated by backward passes; null until the first one (or after it is cleared). */
    DTensor grad;
    /**
     * True once the workers' memory of this tensor, the result of a recorded redistribution, is released: a backward pass
     * redistributes the source again for the derivatives that read it ({@link GradTape#releaseUntilBackward}).
     */
    boolean released;
    /** True for a tensor that is not a leaf and keeps its gradient in {@link #grad} ({@code retain_grad()}). */
    boolean retainsGrad;
    /** The gradient hooks in registration order, by their handles; null until the first. */
    Map<GradTape.HookHandle, UnaryOperator<DTensor>> hooks;

    /** The hooks that run after a backward pass accumulated into {@link #grad} (leaves only); null until the first. */
    Map<GradTape.HookHandle, Consumer<DTensor>> postAccumulateHooks;

    Map<GradTape.HookHandle, UnaryOperator<DTensor>> hooks() {
        if (hooks == null) {
            hooks = new LinkedHashMap<>();
        }
        return hooks;
    }
}
