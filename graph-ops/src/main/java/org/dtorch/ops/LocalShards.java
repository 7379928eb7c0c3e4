package org.dtorch.ops;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.EagerRuntime;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The local-shard API of a single controller: {@link #fromLocal} makes a distributed tensor of one local tensor per
 * device, {@link #toLocal} gives every device's local tensor back. PyTorch's {@code DTensor.from_local} and
 * {@code to_local} take and give one rank's tensor, in every rank's program; here one program holds them all, in the
 * mesh's device order ({@link DeviceMesh#deviceIds()}).
 *
 * <p>{@code from_local} checks everything before anything moves (count, dtype, device kind, every shape against
 * {@link ShardLayout}, and replicas if asked), then queues one {@link LocalShardSpec} per device and one
 * {@link AssembleShardsSpec}. {@code to_local} queues one {@link LocalValueSpec} per device and waits for all of them
 * with one deadline.
 *
 * <p>Not thread-safe: called on the client thread that owns the runtime, as every {@link DTensor} method.
 */
public final class LocalShards {

    private LocalShards() {
    }

    /**
     * A distributed tensor of {@code sharding} made of {@code locals}, one per device of its mesh in the mesh's device
     * order; see {@link DTorch#fromLocal(List, DeviceMesh, long[], boolean, Placement...)}. {@code shape} null infers it.
     *
     * @throws IllegalArgumentException naming the device, for a wrong count, dtype, device kind, shape or differing
     *                                  replica; nothing has been queued then
     */
    public static DTensor fromLocal(DTorch runtime, List<Tensor> locals, Sharding sharding, long[] shape, boolean checkReplicas) {
        Objects.requireNonNull(runtime, "from_local: runtime is null");
        Objects.requireNonNull(locals, "from_local: locals is null");
        DeviceMesh mesh = sharding.mesh();
        List<Long> ids = mesh.deviceIds();
        if (locals.size() != ids.size()) {
            throw new IllegalArgumentException("from_local: " + locals.size() + " local tensors for the " + ids.size() + " devices of " + mesh
                + "; give one per device, in the mesh's device order " + ids);
        }
        ScalarType dtype = null;
        int ndim = -1;
        for (int i = 0; i < ids.size(); i++) {
            Tensor t = locals.get(i);
            if (t == null || t.isNull() || !t.defined()) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + ids.get(i) + " is " + TorchTensors.describe(t));
            }
            if (TorchTensors.deviceKind(t) != mesh.kind()) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + ids.get(i) + " is " + TorchTensors.describe(t)
                    + ", but " + mesh + " is a mesh of " + mesh.kind().shortName() + " devices");
            }
            if (i == 0) {
                dtype = TorchTensors.dtype(t);
                ndim = (int) t.dim();
            } else if (TorchTensors.dtype(t) != dtype || t.dim() != ndim) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + ids.get(i) + " is " + TorchTensors.describe(t)
                    + ", but device " + ids.getFirst() + "'s is " + TorchTensors.describe(locals.getFirst())
                    + " (every device's must have one dtype and one number of dimensions)");
            }
        }
        for (int m = 0; m < mesh.ndim(); m++) {
            if (sharding.placement(m) instanceof Shard s && s.dim() >= ndim) {
                throw new IllegalArgumentException("from_local: placement " + s + " on mesh dimension " + m + " is out of range for local tensors of "
                    + ndim + " dimensions");
            }
        }
        long[] global = shape != null ? checkedShape(shape, ndim) : inferShape(locals, sharding, ndim);
        ShardLayout layout;
        try {
            layout = ShardLayout.of(global, sharding);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("from_local: " + e.getMessage(), e);
        }
        for (int i = 0; i < ids.size(); i++) {
            long[] actual = TorchTensors.shape(locals.get(i));
            long[] expected = layout.localShape(ids.get(i));
            if (!Arrays.equals(actual, expected)) {
                throw new IllegalArgumentException("from_local: the local tensor of device " + ids.get(i) + " has shape " + Arrays.toString(actual)
                    + "; the layout of shape " + Arrays.toString(global) + " under " + sharding.placements() + " on " + mesh
                    + " gives it " + Arrays.toString(expected) + (shape == null ? " (the global shape was inferred from the local shapes)" : ""));
            }
        }
        if (checkReplicas) {
            checkReplicas(locals, sharding);
        }
        TensorMeta meta = new TensorMeta(global, dtype, sharding);
        synchronizeClientStreams(locals);
        List<DTensor> parts = new ArrayList<>(ids.size());
        try {
            boolean threads = !runtime.runtime().options().workerProcesses();
            for (int i = 0; i < ids.size(); i++) {
                DeviceMesh device = DeviceMesh.of(mesh.kind(), ids.get(i));
                LocalShardSpec part;
                if (threads && overlapsAnEarlierOne(locals, i)) {
                    try (Tensor copy = locals.get(i).clone()) {
                        part = new LocalShardSpec(copy, device);
                    }
                } else {
                    part = new LocalShardSpec(locals.get(i), device);
                }
                try {
                    parts.add(runtime.apply(part));
                } catch (RuntimeException e) {
                    part.abandon(e); // refused (a broken runtime): its reference to the caller's tensor goes now
                    throw e;
                }
            }
            return runtime.apply(new AssembleShardsSpec(meta), parts.toArray(DTensor[]::new));
        } finally {
            parts.forEach(DTensor::close);
        }
    }

    /**
     * True when local tensor {@code i} shares memory with an earlier device's (the same tensor given twice, as
     * {@code [x] * 4} for replicas, or overlapping views): in thread mode that device gets a copy, so that every device
     * owns memory of its own, as separate ranks do, and an in-place operator runs once on each element. Views of disjoint
     * parts of one tensor share nothing and stay references.
     */
    private static boolean overlapsAnEarlierOne(List<Tensor> locals, int i) {
        Tensor t = locals.get(i);
        if (t.numel() == 0) {
            return false;
        }
        for (int j = 0; j < i; j++) {
            Tensor u = locals.get(j);
            if (u.numel() > 0 && t.is_alias_of(u) && t.storage_offset() < lastElement(u) && u.storage_offset() < lastElement(t)) {
                return true;
            }
        }
        return false;
    }

    /** One past the last element of its storage that {@code t} (not empty) covers. */
    private static long lastElement(Tensor t) {
        long last = t.storage_offset();
        for (int d = 0; d < t.dim(); d++) {
            last += (t.size(d) - 1) * t.stride(d);
        }
        return last + 1;
    }

    private static long[] checkedShape(long[] shape, int ndim) {
        if (shape.length != ndim) {
            throw new IllegalArgumentException("from_local: shape " + Arrays.toString(shape) + " has " + shape.length
                + " dimensions, the local tensors " + ndim);
        }
        return shape.clone();
    }

    /**
     * The global shape the local shapes imply: along a dimension that mesh dimensions shard, the sum of the local sizes
     * over the devices that differ only in those mesh dimensions' coordinates (each holds one slice of it), taken at the
     * first coordinate of the other mesh dimensions; along any other dimension, the first device's size. The layout
     * check that follows catches local shapes that no global shape explains.
     */
    private static long[] inferShape(List<Tensor> locals, Sharding sharding, int ndim) {
        DeviceMesh mesh = sharding.mesh();
        List<Long> ids = mesh.deviceIds();
        long[] shape = TorchTensors.shape(locals.getFirst());
        for (int d = 0; d < ndim; d++) {
            boolean[] splits = new boolean[mesh.ndim()];
            boolean sharded = false;
            for (int m = 0; m < mesh.ndim(); m++) {
                splits[m] = sharding.placement(m).isShard(d);
                sharded |= splits[m];
            }
            if (!sharded) {
                continue;
            }
            long total = 0;
            for (int i = 0; i < ids.size(); i++) {
                int[] coords = mesh.coordinates(ids.get(i));
                boolean first = true;
                for (int m = 0; m < coords.length; m++) {
                    first &= splits[m] || coords[m] == 0;
                }
                if (first) {
                    total = Math.addExact(total, locals.get(i).size(d));
                }
            }
            shape[d] = total;
        }
        return shape;
    }

    /**
     * Along every replicated mesh dimension the devices must hold equal tensors: each is compared with the device that has
     * coordinate 0 on every replicated mesh dimension and its own coordinates elsewhere.
     */
    private static void checkReplicas(List<Tensor> locals, Sharding sharding) {
        DeviceMesh mesh = sharding.mesh();
        List<Long> ids = mesh.deviceIds();
        for (int i = 0; i < ids.size(); i++) {
            int[] coords = mesh.coordinates(ids.get(i));
            List<Integer> along = new ArrayList<>();
            for (int m = 0; m < coords.length; m++) {
                if (sharding.placement(m).isReplicate() && coords[m] != 0) {
                    coords[m] = 0;
                    along.add(m);
                }
            }
            if (along.isEmpty()) {
                continue;
            }
            long reference = mesh.deviceAt(coords);
            if (!sameValues(locals.get(i), locals.get(mesh.indexOf(reference)))) {
                throw new IllegalArgumentException("from_local (replica check): the local tensor of device " + ids.get(i) + " differs from device "
                    + reference + "'s, its replica along mesh dimension" + (along.size() == 1 ? " " + along.getFirst() : "s " + along)
                    + " (placements " + sharding.placements() + ")");
            }
        }
    }

    private static boolean sameValues(Tensor a, Tensor b) {
        if (TorchTensors.device(a).equals(TorchTensors.device(b))) {
            return a.equal(b);
        }
        try (Tensor ha = a.cpu(); Tensor hb = b.cpu()) {
            return ha.equal(hb);
        }
    }

    /**
     * The client's CUDA tensors were written on its current streams; the workers read them on theirs, so the client's
     * streams finish first (a no-op for CPU tensors).
     */
    private static void synchronizeClientStreams(List<Tensor> locals) {
        Set<Device> gpus = new LinkedHashSet<>();
        for (Tensor t : locals) {
            if (t.is_cuda()) {
                gpus.add(TorchTensors.device(t));
            }
        }
        for (Device gpu : gpus) {
            DeviceStream.of(gpu).synchronize();
        }
    }

    /**
     * Every device's local tensor of {@code t}, in its mesh's device order, which the caller owns; see
     * {@link DTensor#toLocal()}. Waits for all of them with one deadline, the runtime's timeout.
     *
     * @throws CommTimeoutException naming {@code t} and the devices that did not answer by then (the tensors that did
     *                              arrive are released)
     */
    public static List<Tensor> toLocal(DTensor t) {
        Objects.requireNonNull(t, "to_local: tensor is null");
        EagerRuntime runtime = t.runtime().runtime();
        TensorMeta meta = t.meta();
        DeviceMesh mesh = meta.sharding().mesh();
        List<Long> ids = mesh.deviceIds();
        List<TensorFuture> futures = new ArrayList<>(ids.size());
        for (long id : ids) {
            // A host value's shape and dtype are known: a File future's getter allocates it before it sleeps.
            ExpectedValue expected = mesh.kind() == DeviceKind.CPU ? new ExpectedValue(meta.layout().localShape(id), meta.dtype()) : null;
            TensorPromise promise = runtime.newPromise(id, expected);
            futures.add(promise.getFuture());
            runtime.graph().add(new LocalValueSpec(promise, id), List.of(t.operand()));
        }
        Deadline deadline = Deadline.after(runtime.options().timeout());
        List<Tensor> out = new ArrayList<>(ids.size());
        try {
            for (int i = 0; i < ids.size(); i++) {
                Optional<Tensor> value = futures.get(i).waitFor(Duration.ofNanos(Math.max(1, deadline.remainingNanos())));
                if (value.isEmpty()) {
                    List<Long> missing = new ArrayList<>();
                    for (int j = i; j < ids.size(); j++) {
                        if (!futures.get(j).isReady()) {
                            missing.add(ids.get(j));
                        }
                    }
                    throw new CommTimeoutException("to_local of " + t + ": " + deadline.timedOutAfter() + " waiting for the local tensors of devices "
                        + missing + " (of " + ids + "): those devices have not run the operators queued before it");
                }
                out.add(value.get());
            }
            return out;
        } catch (RuntimeException e) {
            out.forEach(Tensor::close);
            throw e;
        }
    }
}
