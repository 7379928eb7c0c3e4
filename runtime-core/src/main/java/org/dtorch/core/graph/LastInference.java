package org.dtorch.core.graph;

import java.util.List;

/**
 * The last metadata inference of a client: the operator spec, its input metadata and the outputs inferred. A
 * loop that applies the same operator to operands of the same metadata (the usual case: a training step, an
 * element-wise chain) then skips {@code OpSpec.inferOutputs}, which is a pure function of the two. The spec is
 * compared by identity, the metadata by identity first and then by value.
 *
 * <p>Thread-safe: immutable; a client publishes a new one by replacing its reference.
 *
 * @param spec    the operator
 * @param inputs  its input metadata
 * @param outputs the metadata inferred for its outputs; {@link TensorMeta} is immutable, so outputs share it
 */
record LastInference(OpSpec spec, List<TensorMeta> inputs, List<TensorMeta> outputs) {

    /** The outputs inferred last time if {@code spec} and {@code metas} are the same as then; else null. */
    List<TensorMeta> outputsIfSame(OpSpec spec, List<TensorMeta> metas) {
        if (spec != this.spec || metas.size() != inputs.size()) {
            return null;
        }
        for (int i = 0; i < metas.size(); i++) {
            TensorMeta now = metas.get(i);
            TensorMeta then = inputs.get(i);
            if (now != then && !now.equals(then)) {
                return null;
            }
        }
        return outputs;
    }
}
