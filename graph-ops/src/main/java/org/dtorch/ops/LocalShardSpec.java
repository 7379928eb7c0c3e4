package org.dtorch.ops;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.process.ProtocolException;
import org.dtorch.core.runtime.process.SpecReader;
import org.dtorch.core.runtime.process.SpecWriter;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One device's local tensor as given by the client, as a tensor on that device alone: the first step of
 * {@code from_local} ({@link LocalShards#fromLocal}), one operator per device, so that in per-device-process mode each
 * worker receives its own tensor and no other. {@link AssembleShardsSpec} then joins them.
 *
 * <p>In thread mode the device keeps a reference to the given tensor, not a copy (later writes to it are visible); a
 * tensor on another GPU than its device's is copied there. In per-device-process mode the codec sends its bytes (a CUDA
 * tensor through the host) and the worker moves them to its device.
 *
 * <p>Thread-safe: the held reference is taken once, by the one kernel or by {@link #abandon}/{@link #sentToWorkers}.
 */
public final class LocalShardSpec implements SourceSpec {
    private final TensorMeta meta;
    private final AtomicReference<Tensor> held;

    private LocalShardSpec(Tensor owned, Sharding oneDevice) {
        if (oneDevice.mesh().count() != 1) {
            throw new IllegalArgumentException("local_shard: the mesh must have one device, got " + oneDevice.mesh());
        }
        this.meta = new TensorMeta(TorchTensors.shape(owned), TorchTensors.dtype(owned), oneDevice);
        this.held = new AtomicReference<>(owned);
    }

    /** {@code local} (a new reference to it; the caller keeps its own) for the one device of {@code device}. */
    public LocalShardSpec(Tensor local, DeviceMesh device) {
        this(new Tensor(Objects.requireNonNull(local, "local_shard: tensor is null")), oneDevice(device));
    }

    /** Takes {@code local} itself (read from the wire), which nobody else may use or close afterwards. */
    static LocalShardSpec owning(Tensor local, Sharding oneDevice) {
        try {
            return new LocalShardSpec(local, oneDevice);
        } catch (RuntimeException e) {
            local.close();
            throw e;
        }
    }

    private static Sharding oneDevice(DeviceMesh device) {
        Objects.requireNonNull(device, "local_shard: device mesh is null");
        return new Sharding(device, List.of(Placement.replicate()));
    }

    @Override
    public TensorMeta output() {
        return meta;
    }

    @Override
    public String name() {
        return "local_shard";
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return (ctx, in) -> {
            Tensor local = held.getAndSet(null);
            if (local == null) {
                throw new IllegalStateException("local_shard of device " + deviceId + ": the tensor was taken already");
            }
            try (local) {
                return Collections.singletonList(TorchTensors.to(local, HostMeshes.placement(ctx, meta.sharding().mesh())));
            }
        };
    }

    /** The operator will not run: the reference goes. */
    @Override
    public void abandon(Throwable cause) {
        release();
    }

    /** Per-device-process mode: the worker got the bytes; the reference goes. */
    @Override
    public void sentToWorkers() {
        release();
    }

    private void release() {
        Tensor local = held.getAndSet(null);
        if (local != null) {
            local.close();
        }
    }

    /**
     * The codec's writer ({@link OpsCodecs}), before {@link #sentToWorkers}: the one-device sharding, then the tensor's
     * bytes (a CUDA tensor's through the host); a zero-size tensor, which has no bytes and no data pointer, as its dtype
     * and shape alone.
     */
    void write(SpecWriter out) {
        Tensor local = held.get();
        if (local == null) {
            throw new IllegalStateException("local_shard: the tensor was released before it was encoded");
        }
        out.sharding(meta.sharding());
        boolean empty = local.numel() == 0;
        out.wire().putBoolean(empty);
        if (empty) {
            out.wire().putDtype(meta.dtype()).putLongs(meta.shape());
            return;
        }
        try (Tensor host = local.is_cuda() ? local.cpu() : new Tensor(local)) {
            out.tensor(host);
        }
    }

    /** The codec's reader, in the worker: what {@link #write} wrote, as a spec that owns the tensor read. */
    static LocalShardSpec read(SpecReader in) {
        Sharding sharding = in.sharding("local_shard sharding");
        if (!in.wire().getBoolean("local_shard empty")) {
            return owning(in.tensor("local_shard data"), sharding);
        }
        ScalarType dtype = in.wire().getDtype("local_shard dtype");
        long[] shape = in.wire().getShape("local_shard shape");
        if (Arrays.stream(shape).allMatch(n -> n > 0)) {
            throw new ProtocolException("local_shard: shape " + Arrays.toString(shape) + ", sent as empty, has elements");
        }
        try (TensorOptions options = TorchTensors.options(dtype, Device.cpu(0))) {
            return owning(torch.empty(shape, options, new MemoryFormatOptional()), sharding);
        }
    }
}
