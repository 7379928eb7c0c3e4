package org.dtorch.api;

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
}
