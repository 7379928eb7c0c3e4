package org.dtorch.ops;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * {@code tensor(data)}: a distributed tensor from a full CPU tensor the client holds. The operator carries
 * its own copy of the data; each device copies out only its shard, and the last one drops the data.
 *
 * <p>Sharding rule: {@code S(d)} and {@code R}; partial placements are rejected.
 *
 * <p>Thread-safe: immutable apart from the count of devices still to take their shard.
 */
public final class FromTensorSpec implements SourceSpec {
    private final Tensor data;
    private final TensorMeta meta;
    private final AtomicInteger devicesLeft;

    /** Takes a copy of {@code source} (the caller keeps and may change its own). */
    public FromTensorSpec(Tensor source, Sharding sharding) {
        this(source, sharding, true);
    }

    /** Takes {@code source} itself, which nobody else may use or close afterwards. */
    public static FromTensorSpec owning(Tensor source, Sharding sharding) {
        return new FromTensorSpec(source, sharding, false);
    }

    /** Takes {@code source} itself, for a worker process that runs the operator on one device only. */
    static FromTensorSpec owningForOneDevice(Tensor source, Sharding sharding) {
        return new FromTensorSpec(source, sharding, false, 1);
    }

    private FromTensorSpec(Tensor source, Sharding sharding, boolean copy) {
        this(source, sharding, copy, sharding.mesh().count());
    }

    private FromTensorSpec(Tensor source, Sharding sharding, boolean copy, int devices) {
        Objects.requireNonNull(source, "tensor: data is null");
        if (!source.is_cpu()) {
            throw new IllegalArgumentException("tensor: the data must be a CPU tensor, got " + TorchTensors.describe(source));
        }
        this.meta = Rules.factoryMeta("tensor", new TensorMeta(TorchTensors.shape(source), TorchTensors.dtype(source), sharding));
        this.data = copy ? source.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous)) : source;
        this.devicesLeft = new AtomicInteger(devices);
    }

    @Override
    public TensorMeta output() {
        return meta;
    }

    @Override
    public String name() {
        return "tensor";
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return (ctx, in) -> {
            try (Tensor view = meta.layout().localSlice(data, deviceId)) {
                Device device = HostMeshes.placement(ctx, meta.sharding().mesh());
                if (device.kind() == DeviceKind.CPU) {
                    return java.util.Collections.singletonList(view.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous)));
                }
                try (Tensor moved = TorchTensors.to(view, device)) {
                    return java.util.Collections.singletonList(moved.contiguous());
                }
            } finally {
                if (devicesLeft.decrementAndGet() == 0) {
                    data.close();
                }
            }
        };
    }

    /** Per-device-process mode: the workers got their copy; drop the controller's. */
    @Override
    public void sentToWorkers() {
        if (devicesLeft.getAndSet(0) > 0) {
            data.close();
        }
    }

    /** The values, for the codec; valid until every device took its shard. */
    Tensor data() {
        return data;
    }

    Sharding sharding() {
        return meta.sharding();
    }
}
