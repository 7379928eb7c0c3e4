package org.dtorch.ops;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.safetensors.MappedShards;
import org.dtorch.core.safetensors.TensorEntry;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code load_safetensors}: a tensor read from a safetensors file, each device mapping and copying only the bytes of
 * its own shard ({@link MappedShards#read}) on its worker, so the controller never holds the data: the operator
 * carries the file's path, where its data starts and the tensor's header entry, which the controller validated before
 * issuing it. A device of a CUDA mesh reads into host memory and copies to its GPU.
 *
 * <p>Sharding rule: {@code S(d)} and {@code R} (the balanced split of {@link ShardLayout}, empty shards included);
 * partial placements are refused, as a file holds one value of each tensor.
 *
 * <p>Thread-safe: immutable.
 */
public final class SafeTensorsLoadSpec implements SourceSpec {
    private final String file;
    private final long dataStart;
    private final TensorEntry entry;
    private final TensorMeta meta;

    /**
     * Reads {@code entry} of {@code file}, whose data section starts at byte {@code dataStart}, with {@code sharding}.
     *
     * @throws ShardingException        for a partial placement
     * @throws IllegalArgumentException for a shard dimension out of the tensor's range
     */
    public SafeTensorsLoadSpec(Path file, long dataStart, TensorEntry entry, Sharding sharding) {
        this.file = Objects.requireNonNull(file, "file").toAbsolutePath().toString();
        this.dataStart = dataStart;
        this.entry = Objects.requireNonNull(entry, "entry");
        if (dataStart < 8) {
            throw new IllegalArgumentException("load_safetensors: data cannot start at byte " + dataStart + " (the header length takes 8)");
        }
        this.meta = Rules.factoryMeta(name(), new TensorMeta(entry.shape(), entry.dtype().torch(), Objects.requireNonNull(sharding, "sharding")));
    }

    @Override
    public TensorMeta output() {
        return meta;
    }

    @Override
    public String name() {
        return "load_safetensors";
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        ShardLayout layout = meta.layout();
        long[] local = layout.localShape(deviceId);
        long[] offsets = layout.offsets(deviceId);
        return (ctx, in) -> {
            Device device = HostMeshes.placement(ctx, meta.sharding().mesh());
            Tensor host = MappedShards.read(Path.of(file), dataStart, entry, local, offsets);
            if (device.kind() == DeviceKind.CPU) {
                return List.of(host);
            }
            try (host) {
                return List.of(TorchTensors.to(host, device));
            }
        };
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

    Sharding sharding() {
        return meta.sharding();
    }

    @Override
    public String toString() {
        return "load_safetensors(" + file + ", " + entry + ", " + meta.sharding() + ")";
    }
}
