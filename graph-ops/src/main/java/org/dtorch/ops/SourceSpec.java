package org.dtorch.ops;

import java.util.List;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * An operator with no inputs that makes one tensor of a layout known when it is issued: a factory, a tensor from the
 * client, a local shard, a tensor read from a file. Such an operator may run on a CPU mesh of a runtime on CUDA: its
 * output is host memory there, the mesh being its workers' host memory.
 *
 * <p>Thread-safe as its implementations are: they are immutable once issued.
 */
interface SourceSpec extends OpSpec {

    /** The one output's shape, dtype and sharding. */
    TensorMeta output();

    @Override
    default List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 0);
        return List.of(output());
    }

    @Override
    default boolean runsOnHostMeshes(Operator op) {
        return true;
    }
}
