package org.dtorch.core.graph;

import java.util.List;
import org.dtorch.core.distributed.RedistributionPlan;

/**
 * An operator type with its parameters: it infers outputs from inputs' metadata (the sharding rule) and
 * builds the kernel each device runs. The {@code graph-ops} module implements one per operator; the
 * runtime knows them only through this interface.
 *
 * <p>Thread-safe: implementations must be immutable; one spec may serve many operators.
 */
public interface OpSpec {

    /** The operator's name, as the user wrote it: {@code add}, {@code matmul}. */
    String name();

    /**
     * The outputs' metadata for these inputs' metadata. Runs on the client thread before the operator is
     * queued.
     *
     * @throws ShardingException        if the inputs' placements are not a combination the operator accepts
     * @throws IllegalArgumentException if shapes, dtypes or parameters do not fit
     */
    List<TensorMeta> inferOutputs(List<TensorMeta> inputs);

    /** The kernel for one device of one operator. */
    DeviceKernel kernel(Operator op, long deviceId);

    /**
     * True when the kernel may communicate with other devices (collectives, stores). A device whose inputs
     * failed upstream still runs such a kernel, on placeholder data, so that its peers are not left waiting.
     */
    default boolean communicates() {
        return false;
    }

    /**
     * The positions, among {@code op}'s inputs, of the tensors its kernel writes in place ({@code copy_}, {@code add_},
     * an optimizer's {@code _foreach_*_} step). When the operator fails, or an input failed upstream, those tensors are
     * failed too: their values are unknown (the write did not happen, or happened in part), and a later read must say
     * so rather than return the old values. None by default.
     */
    default List<Integer> writtenInputs(Operator op) {
        return List.of();
    }

    /**
     * The operator will never run on some of its devices (the worker process of one died, or the runtime is
     * shutting down): complete, with {@code cause}, whatever the client waits on. System operators that carry
     * a promise fail it (unless it is complete already); the default does nothing.
     */
    default void abandon(Throwable cause) {
    }

    /**
     * The operator was encoded and sent to the worker processes of all its devices (per-device-process mode):
     * this process will not run its kernel. A spec that holds data for its kernels (a tensor from the client)
     * may drop it now; the default does nothing.
     */
    default void sentToWorkers() {
    }

    /**
     * True when the operator may run with {@code op}'s tensors on a CPU mesh of a runtime on CUDA (host memory of
     * its GPU workers): factories, {@code tensor()}, {@code get_tensor}, and redistributions and
     * copies that move between a CPU and a CUDA mesh. The runtime refuses every other operator there, since kernels
     * place their outputs on the worker stream's device; the default is false.
     */
    default boolean runsOnHostMeshes(Operator op) {
        return false;
    }

    /**
     * The devices that run the operator, sorted. By default every device of every input's and output's mesh.
     */
    default List<Long> devices(Operator op) {
        return op.defaultDevices();
    }

    /**
     * The redistributions {@code op}'s kernels carry out, in order, as the planner planned them: what the graph dump
     * ({@link GraphDot}) shows on the operator's node. None by default.
     */
    default List<RedistributionPlan> redistributions(Operator op) {
        return List.of();
    }
}
