package org.dtorch.ops;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.safetensors.MappedShards;
import org.dtorch.core.safetensors.TensorEntry;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code save_safetensors}: writes a distributed tensor into its place in a safetensors file the controller laid out
 * and sized ({@link org.dtorch.core.safetensors.SafeTensorsWriter}), each device writing its own shard's bytes
 * ({@link MappedShards#write}) on its worker, so no tensor is gathered. Of the devices that hold equal shards
 * (replicas along {@code R} mesh dimensions) the one at coordinate 0 of those dimensions writes.
 *
 * <p>Its output is the bytes each device wrote: an int64 tensor of the mesh's shape, {@code S(i)} on each mesh
 * dimension {@code i}, so every device holds its own count; the controller reads it to wait for the writes and to
 * check that they cover the tensor.
 *
 * <p>Sharding rule: {@code S(d)} and {@code R}; a partial input is refused (reduce it first).
 *
 * <p>Thread-safe: immutable.
 */
public final class SafeTensorsSaveSpec implements OpSpec {
    private final String file;
    private final long dataStart;
    private final TensorEntry entry;

    /** Writes tensors of {@code entry}'s dtype and shape into {@code file}, whose data section starts at {@code dataStart}. */
    public SafeTensorsSaveSpec(Path file, long dataStart, TensorEntry entry) {
        this.file = Objects.requireNonNull(file, "file").toAbsolutePath().toString();
        this.dataStart = dataStart;
        this.entry = Objects.requireNonNull(entry, "entry");
    }

    @Override
    public String name() {
        return "save_safetensors";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 1);
        TensorMeta in = inputs.getFirst();
        if (in.dtype() != entry.dtype().torch() || !Arrays.equals(in.shape(), entry.shape())) {
            throw new IllegalArgumentException(name() + ": tensor '" + entry.name() + "' is laid out as " + entry.dtype() + " "
                + Arrays.toString(entry.shape()) + ", got " + TorchTensors.dtypeName(in.dtype()) + " " + Arrays.toString(in.shape()));
        }
        Rules.factoryMeta(name(), in);
        return List.of(countsMeta(in.sharding().mesh()));
    }

    /** An int64 tensor of the mesh's shape, {@code S(i)} on mesh dimension {@code i}: one element per device. */
    static TensorMeta countsMeta(DeviceMesh mesh) {
        int[] meshShape = mesh.shape();
        long[] shape = new long[meshShape.length];
        List<Placement> placements = new ArrayList<>();
        for (int i = 0; i < meshShape.length; i++) {
            shape[i] = meshShape[i];
            placements.add(Placement.shard(i));
        }
        return new TensorMeta(shape, ScalarType.Long, new Sharding(mesh, placements));
    }

    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return true;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        TensorMeta in = op.inputs().getFirst().meta();
        ShardLayout layout = in.layout();
        long[] offsets = layout.offsets(deviceId);
        boolean writes = writes(in.sharding(), deviceId);
        long[] countShape = countsMeta(in.sharding().mesh()).layout().localShape(deviceId);
        return (ctx, inputs) -> {
            long written = 0;
            if (writes) {
                try (Tensor host = TorchTensors.to(inputs.getFirst(), Device.cpu(0))) {
                    written = MappedShards.write(Path.of(file), dataStart, entry, offsets, host);
                }
            }
            try (TensorOptions options = TorchTensors.options(ScalarType.Long, HostMeshes.placement(ctx, in.sharding().mesh()));
                 Scalar value = new Scalar(written)) {
                return List.of(torch.full(countShape, value, options));
            }
        };
    }

    /** True when {@code deviceId} writes its shard: it is at coordinate 0 of every mesh dimension that does not shard. */
    static boolean writes(Sharding sharding, long deviceId) {
        int[] coordinates = sharding.mesh().coordinates(deviceId);
        for (int i = 0; i < coordinates.length; i++) {
            if (!(sharding.placement(i) instanceof Shard) && coordinates[i] != 0) {
                return false;
            }
        }
        return true;
    }

    String file() {
        return file;
    }

    long dataStart() {
        return dataStart;
    }

    TensorEntry entry() {
        return entry;
    }

    @Override
    public String toString() {
        return "save_safetensors(" + file + ", " + entry + ")";
    }
}
