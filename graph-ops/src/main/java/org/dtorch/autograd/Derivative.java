package org.dtorch.autograd;

import org.dtorch.api.DTensor;

/**
 * The derivative of one recorded operator: the gradients of its inputs from the gradients of its outputs, issued as
 * distributed operators (which choose their own sharding strategies and implicit redistributions).
 *
 * <p>Thread-safe: a derivative holds only the recorded operator's constants; it runs on the client thread.
 */
@FunctionalInterface
public interface Derivative {
    /**
     * The gradient of each input (null where {@code needs} is false, or where the input gets none).
     *
     * @param inputs  the operator's inputs, as recorded
     * @param outputs the operator's outputs, as recorded
     * @param grads   one gradient per output (zeros where none reached it)
     * @param needs   which inputs require grad
     */
    DTensor[] apply(DTensor[] inputs, DTensor[] outputs, DTensor[] grads, boolean[] needs);
}
