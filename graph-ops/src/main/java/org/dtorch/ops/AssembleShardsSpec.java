package org.dtorch.ops;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The second step of {@code from_local} ({@link LocalShards#fromLocal}): one tensor per device of a mesh, each on its
 * device alone ({@link LocalShardSpec}) and in the mesh's device order, joined as one distributed tensor of a given
 * global shape and sharding. Every device takes its own input as its local tensor, by reference: nothing is copied or
 * communicated. Any placement goes, {@code P} included (the inputs are then the partial values).
 *
 * <p>{@link #inferOutputs} checks each input's device, dtype and shape against the layout
 * ({@link ShardLayout#localShape}), so a wrong one fails in the client's thread, naming the device.
 *
 * <p>Thread-safe: immutable.
 */
public final class AssembleShardsSpec implements OpSpec {
    private final TensorMeta meta;

    /** Joins one tensor per device of {@code meta}'s mesh into a tensor of {@code meta}. */
    public AssembleShardsSpec(TensorMeta meta) {
        this.meta = Objects.requireNonNull(meta, "from_local: meta is null");
    }

    /** The global tensor made. */
    public TensorMeta meta() {
        return meta;
    }

    @Override
    public String name() {
        return "from_local";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        DeviceMesh mesh = meta.sharding().mesh();
        List<Long> ids = mesh.deviceIds();
        Rules.arity(name(), inputs, ids.size());
        ShardLayout layout = meta.layout();
        for (int i = 0; i < ids.size(); i++) {
            TensorMeta in = inputs.get(i);
            long id = ids.get(i);
            DeviceMesh own = in.sharding().mesh();
            if (own.kind() != mesh.kind() || !own.deviceIds().equals(List.of(id))) {
                throw new IllegalArgumentException("from_local: input " + i + " must be on device " + id + " of " + mesh + " alone, got " + own);
            }
            if (in.dtype() != meta.dtype()) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + id + " is "
                    + TorchTensors.dtypeName(in.dtype()) + ", the tensor " + TorchTensors.dtypeName(meta.dtype()));
            }
            if (!Arrays.equals(in.shape(), layout.localShape(id))) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + id + " has shape " + Arrays.toString(in.shape())
                    + "; the layout of shape " + Arrays.toString(meta.shape()) + " under " + meta.placements() + " on " + mesh
                    + " gives it " + Arrays.toString(layout.localShape(id)));
            }
        }
        return List.of(meta);
    }

    /** Local tensors on a CPU mesh of a runtime on CUDA stay in host memory, as {@code tensor()}'s shards do. */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return true;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        int index = meta.sharding().mesh().indexOf(deviceId);
        return (ctx, in) -> Collections.singletonList(new Tensor(in.get(index)));
    }

    @Override
    public String toString() {
        return "AssembleShardsSpec(" + meta + ")";
    }
}
