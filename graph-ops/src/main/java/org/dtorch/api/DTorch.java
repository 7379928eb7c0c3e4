package org.dtorch.api;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.ExpectedValue;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.GraphDot;
import org.dtorch.core.graph.GraphHistory;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.EagerRuntime;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.runtime.PromiseSpec;
import org.dtorch.core.runtime.process.NodeSpec;
import org.dtorch.core.trace.Profiler;
import org.dtorch.core.kernel.ChannelTransferKernel;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.CopySpec;
import org.dtorch.ops.InPlaceSpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RegionWriteSpec;
import org.dtorch.ops.aten.Overload;
import org.dtorch.ops.ChannelDetachSpec;
import org.dtorch.ops.CompareCalls;
import org.dtorch.ops.LocalShards;
import org.dtorch.ops.FallbackWarnings;
import org.dtorch.ops.ShardingStrategy;
import org.dtorch.ops.StrategyTable;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.FromTensorSpec;
import org.dtorch.ops.ProductCalls;
import org.dtorch.ops.Shapes;

/**
 * The entry point: {@link #init(DTorchOptions)} starts a runtime (one worker thread per device, or one worker
 * process per device and a controller thread) and returns the handle through which the client makes tensors and runs operators. The client
 * never waits for a kernel; it reads values through futures.
 *
 * <p>Factories take a shape, optionally a dtype (default float32), a mesh and placements (none means
 * {@code R} on every mesh dimension; the short forms use the default mesh). Integer values ({@code long}
 * overloads) stay exact; a value the dtype cannot hold, a negative size or an element count beyond a long is
 * refused at the call. A null argument is a {@link NullPointerException} naming it.
 *
 * <p>Not thread-safe: one client thread builds the graph (program order is call order). {@link #close()}
 * may be called from any thread.
 */
public final class DTorch implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(DTorch.class.getName());
    private final EagerRuntime runtime;
    private final DeviceMesh defaultMesh;
    /** The declared edges by (source, destination) mesh, in declaration order. */
    private final Map<List<DeviceMesh>, ChannelEdge> channels = new LinkedHashMap<>();
    private int channelsDeclared;
    private final Profiler profiler = new Profiler();
    /** Where {@link #close()} writes the trace, or null; set to null once written. */
    private Path tracePath;
    /** Moves operators' inputs to placements they take, unless the strict mode is on. */
    private final ImplicitRedistribution implicit;
    /** Keeps views sharing memory with their bases, or following them. */
    private final Aliasing aliasing = new Aliasing(this);

    private DTorch(DTorchOptions options) {
        this.tracePath = options.trace().orElse(null);
        this.implicit = new ImplicitRedistribution(this, options.implicitRedistribution());
        if (tracePath != null) {
            profiler.start();
        }
        DeviceMesh mesh;
        try {
            this.runtime = EagerRuntime.start(options.runtime());
            try {
                mesh = DeviceMesh.initDeviceMesh(options.runtime().deviceKind(), options.meshShape(), options.meshDimNames());
            } catch (RuntimeException e) {
                runtime.close();
                throw e;
            }
        } catch (RuntimeException e) {
            if (profiler.isRecording()) {
                profiler.stop();
            }
            throw e;
        }
        this.defaultMesh = mesh;
    }

    /**
     * Starts a runtime.
     *
     * @throws org.dtorch.core.device.CudaUnavailableException for CUDA devices this process cannot use
     * @throws org.dtorch.core.communication.CommException if per-device-process mode cannot start its workers
     */
    public static DTorch init(DTorchOptions options) {
        return new DTorch(Objects.requireNonNull(options, "options"));
    }

    /** Starts a runtime with the defaults (4 CPU devices). */
    public static DTorch init() {
        return init(DTorchOptions.defaults());
    }

    /** The mesh over all devices that factories use when given none. */
    public DeviceMesh defaultMesh() {
        return defaultMesh;
    }

    /** A mesh of this runtime's devices {@code 0..n-1} in row-major order. */
    public DeviceMesh initDeviceMesh(int[] shape, String... dimNames) {
        Objects.requireNonNull(shape, "initDeviceMesh: shape is null");
        return DeviceMesh.initDeviceMesh(runtime.options().deviceKind(), shape, nonNullElements("initDeviceMesh", "dimNames", dimNames));
    }

    /** A 1-D mesh of the given devices. */
    public DeviceMesh mesh(long... deviceIds) {
        return DeviceMesh.of(runtime.options().deviceKind(), Objects.requireNonNull(deviceIds, "mesh: deviceIds is null"));
    }

    /**
     * A mesh of devices {@code 0..n-1} of {@code kind}: the runtime's kind, or, in a runtime on CUDA, {@code CPU} for
     * the host memory of the same workers (decision 141), where factories, {@code tensor()}, {@code toTorch()} and
     * moves to and from CUDA meshes run.
     *
     * @throws IllegalArgumentException for another kind
     */
    public DeviceMesh initDeviceMesh(DeviceKind kind, int[] shape, String... dimNames) {
        Objects.requireNonNull(shape, "initDeviceMesh: shape is null");
        return checkKind("initDeviceMesh", DeviceMesh.initDeviceMesh(Objects.requireNonNull(kind, "initDeviceMesh: kind is null"), shape,
            nonNullElements("initDeviceMesh", "dimNames", dimNames)));
    }

    /** A 1-D mesh of the given devices of {@code kind}, as {@link #initDeviceMesh(DeviceKind, int[], String...)}. */
    public DeviceMesh mesh(DeviceKind kind, long... deviceIds) {
        return checkKind("mesh", DeviceMesh.of(Objects.requireNonNull(kind, "mesh: kind is null"),
            Objects.requireNonNull(deviceIds, "mesh: deviceIds is null")));
    }

    private DeviceMesh checkKind(String op, DeviceMesh mesh) {
        DeviceKind runtimeKind = runtime.options().deviceKind();
        if (mesh.kind() != runtimeKind && !(runtimeKind == DeviceKind.CUDA && mesh.kind() == DeviceKind.CPU)) {
            throw new IllegalArgumentException(op + ": " + mesh + " is not made of this runtime's " + runtimeKind.shortName()
                + " devices (a runtime on CUDA also has cpu meshes, the host memory of its workers; a cpu runtime has no cuda ones)");
        }
        return mesh;
    }

    /** The runtime underneath (diagnostics, collective counts, custom operators). */
    public EagerRuntime runtime() {
        return runtime;
    }

    GraphConstructor graph() {
        return runtime.graph();
    }

    // ---- factories ----------------------------------------------------------------------------------

    /** Zeros on the default mesh, replicated, float32. */
    public DTensor zeros(long... shape) {
        return zeros(shape, ScalarType.Float, defaultMesh);
    }

    /** Zeros. */
    public DTensor zeros(long[] shape, DeviceMesh mesh, Placement... placements) {
        return zeros(shape, ScalarType.Float, mesh, placements);
    }

    /** Zeros of {@code dtype}. */
    public DTensor zeros(long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.of(FactorySpec.Kind.ZEROS, shape, dtype, sharding("zeros", mesh, placements)));
    }

    /** Ones on the default mesh, replicated, float32. */
    public DTensor ones(long... shape) {
        return ones(shape, ScalarType.Float, defaultMesh);
    }

    /** Ones. */
    public DTensor ones(long[] shape, DeviceMesh mesh, Placement... placements) {
        return ones(shape, ScalarType.Float, mesh, placements);
    }

    /** Ones of {@code dtype}. */
    public DTensor ones(long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.of(FactorySpec.Kind.ONES, shape, dtype, sharding("ones", mesh, placements)));
    }

    /** An uninitialized tensor on the default mesh, replicated, float32. */
    public DTensor empty(long... shape) {
        return empty(shape, ScalarType.Float, defaultMesh);
    }

    /** An uninitialized tensor of {@code dtype}. */
    public DTensor empty(long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.of(FactorySpec.Kind.EMPTY, shape, dtype, sharding("empty", mesh, placements)));
    }

    /** A tensor filled with {@code value}, float32. */
    public DTensor full(double value, long[] shape, DeviceMesh mesh, Placement... placements) {
        return full(value, shape, ScalarType.Float, mesh, placements);
    }

    /** A tensor of {@code dtype} filled with {@code value} (a NaN or a value out of an integral dtype's range is refused). */
    public DTensor full(double value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.full(value, shape, dtype, sharding("full", mesh, placements)));
    }

    /** A tensor of {@code dtype} filled with the exact integer {@code value} (one out of the dtype's range is refused). */
    public DTensor full(long value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.full(value, shape, dtype, sharding("full", mesh, placements)));
    }

    /** {@code 0, 1, ..., end - 1} as int64 on the default mesh, replicated. */
    public DTensor arange(long end) {
        return arange(0, end, 1, ScalarType.Long, defaultMesh);
    }

    /** {@code start, start + step, ...} below {@code end} (above it for a negative step), as a 1-D tensor of {@code dtype}. */
    public DTensor arange(double start, double end, double step, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.arange(start, end, step, dtype, sharding("arange", mesh, placements)));
    }

    /** {@code start, start + step, ...} below {@code end} (above it for a negative step), computed in exact integers. */
    public DTensor arange(long start, long end, long step, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.arange(start, end, step, dtype, sharding("arange", mesh, placements)));
    }

    /** Uniform values in [0, 1), float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor rand(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.random(FactorySpec.Kind.RAND, seed, shape, ScalarType.Float, sharding("rand", mesh, placements)));
    }

    /** Standard normal values, float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return randn(seed, shape, ScalarType.Float, mesh, placements);
    }

    /** Standard normal values of {@code dtype}; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.random(FactorySpec.Kind.RANDN, seed, shape, dtype, sharding("randn", mesh, placements)));
    }

    /** A distributed copy of a CPU torch tensor (the caller keeps its own). */
    public DTensor tensor(Tensor data, DeviceMesh mesh, Placement... placements) {
        return apply(new FromTensorSpec(data, sharding("tensor", mesh, placements)));
    }

    /** A float32 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(float[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new FloatPointer(data), ScalarType.Float, shape, sharding);
    }

    /** A float64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(double[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new DoublePointer(data), ScalarType.Double, shape, sharding);
    }

    /** An int64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(long[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new LongPointer(data), ScalarType.Long, shape, sharding);
    }

    /** Checks Java data against its shape before anything native is allocated. */
    private static void checkData(long length, long[] shape) {
        if (length < 0) {
            throw new NullPointerException("tensor: data is null");
        }
        Objects.requireNonNull(shape, "tensor: shape is null");
        long numel = Shapes.numel("tensor", shape);
        if (numel != length) {
            throw new IllegalArgumentException("tensor: " + length + " values do not fill shape " + Arrays.toString(shape));
        }
    }

    /** Takes {@code data} (closing it) and makes the tensor; the copy it makes is freed if the operator is refused. */
    private DTensor fromPointer(Pointer data, ScalarType dtype, long[] shape, Sharding sharding) {
        Tensor owned;
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(dtype));
             Tensor view = torch.from_blob(data, shape, options)) {
            owned = view.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
        }
        FromTensorSpec spec;
        try {
            spec = FromTensorSpec.owning(owned, sharding);
        } catch (RuntimeException e) {
            owned.close();
            throw e;
        }
        return apply(spec);
    }

    // ---- operators taking several tensors -------------------------------------------------------------

    /** {@code x W^T}: a linear layer without bias ({@code weight: [out, in]}), as {@link #linear(DTensor, DTensor, DTensor)}. */
    public DTensor linear(DTensor x, DTensor weight) {
        Objects.requireNonNull(x, "linear: x is null");
        Objects.requireNonNull(weight, "linear: weight is null");
        return aten(ProductCalls.LINEAR, x, weight).getFirst();
    }

    /**
     * {@code x W^T + b}: a linear layer ({@code weight: [out, in]}, {@code bias: [out]}) through the generic operator
     * ({@link #aten}): column-parallel ({@code R, S(0), S(0)}) gives {@code S(last)}, row-parallel ({@code S(last), S(1)})
     * {@code P(sum)} with the bias made partial so the reduction adds it once; other placements are redistributed the
     * cheapest way first.
     */
    public DTensor linear(DTensor x, DTensor weight, DTensor bias) {
        Objects.requireNonNull(x, "linear: x is null");
        Objects.requireNonNull(weight, "linear: weight is null");
        Objects.requireNonNull(bias, "linear: bias is null");
        return aten(ProductCalls.LINEAR_BIAS, x, weight, bias).getFirst();
    }

    /**
     * The concatenation of {@code tensors} along {@code dim} (negative counts from the end): {@code aten::cat} through
     * {@link #aten}, so inputs sharded alike on another dimension stay sharded and the concatenation dimension is
     * gathered first.
     */
    public DTensor cat(List<DTensor> tensors, int dim) {
        Objects.requireNonNull(tensors, "cat: tensors is null");
        DTensor[] inputs = new DTensor[tensors.size()];
        for (int i = 0; i < inputs.length; i++) {
            inputs[i] = Objects.requireNonNull(tensors.get(i), "cat: tensors[" + i + "] is null");
        }
        AtenCall call = new AtenCall(AtenOps.overload("cat", ""), List.of(new AtenCall.InputList(0, inputs.length),
            new AtenCall.Constant((long) dim)));
        return aten(call, inputs).getFirst();
    }

    // ---- where, and tensors from every device's local tensor ----------------------------------------------------

    /**
     * {@code a} where {@code condition} (bool) is true, else {@code b}, broadcasting the three: {@code aten::where}
     * through {@link #aten} (element-wise placements); the dtype is torch's promotion of {@code a} and {@code b}.
     */
    public DTensor where(DTensor condition, DTensor a, DTensor b) {
        return whereCall("T,T,T", null, condition, a, b);
    }

    /** {@code a} where {@code condition} is true, else the number {@code b}. */
    public DTensor where(DTensor condition, DTensor a, double b) {
        return whereCall("T,T,f", b, condition, a);
    }

    /** {@code a} where {@code condition} is true, else the exact integer {@code b}. */
    public DTensor where(DTensor condition, DTensor a, long b) {
        return whereCall("T,T,i", b, condition, a);
    }

    /** The number {@code a} where {@code condition} is true, else {@code b}. */
    public DTensor where(DTensor condition, double a, DTensor b) {
        return whereCall("T,f,T", a, condition, b);
    }

    /** The exact integer {@code a} where {@code condition} is true, else {@code b}. */
    public DTensor where(DTensor condition, long a, DTensor b) {
        return whereCall("T,i,T", a, condition, b);
    }

    /** {@code a} where {@code condition} is true, else {@code b}: a float32 tensor of the condition's shape and placements. */
    public DTensor where(DTensor condition, double a, double b) {
        Objects.requireNonNull(condition, "where: condition is null");
        return aten(CompareCalls.of("where", "T,f,f", null, a, b), condition).getFirst();
    }

    /** {@code a} where {@code condition} is true, else {@code b}: an int64 tensor of the condition's shape and placements. */
    public DTensor where(DTensor condition, long a, long b) {
        Objects.requireNonNull(condition, "where: condition is null");
        return aten(CompareCalls.of("where", "T,i,i", null, a, b), condition).getFirst();
    }

    /** {@code where} with one scalar branch ({@code scalar}, at the key's {@code f} or {@code i}) or none (null). */
    private DTensor whereCall(String key, Object scalar, DTensor... tensors) {
        for (int i = 0; i < tensors.length; i++) {
            Objects.requireNonNull(tensors[i], "where: " + (i == 0 ? "condition" : "tensor branch " + i) + " is null");
        }
        boolean scalarLast = key.charAt(2) == 'T'; // "T,T,f": the condition and a tensor a, then the number b
        Object[] values = scalar == null ? new Object[3] : scalarLast ? new Object[] {null, null, scalar} : new Object[] {null, scalar, null};
        return aten(CompareCalls.of("where", key, values), tensors).getFirst();
    }

    /**
     * {@link #fromLocal(List, DeviceMesh, long[], boolean, Placement...)} with the global shape inferred from the local
     * shapes and replicas taken as given.
     */
    public DTensor fromLocal(List<Tensor> locals, DeviceMesh mesh, Placement... placements) {
        return fromLocal(locals, mesh, null, false, placements);
    }

    /** {@link #fromLocal(List, DeviceMesh, long[], boolean, Placement...)} with replicas taken as given. */
    public DTensor fromLocal(List<Tensor> locals, DeviceMesh mesh, long[] shape, Placement... placements) {
        return fromLocal(locals, mesh, shape, false, placements);
    }

    /**
     * A distributed tensor made of one local tensor per device of {@code mesh}, in the mesh's device order
     * ({@link DeviceMesh#deviceIds()}): the single-controller form of PyTorch's {@code DTensor.from_local}, which takes
     * one rank's. Each local tensor is its device's shard, replica or partial value under {@code placements}; their
     * dtype and device kind must agree with each other and with the mesh, and each shape must be the one the layout of
     * {@code shape} ({@link org.dtorch.core.distributed.ShardLayout}) gives its device. A null {@code shape} is inferred:
     * the local sizes summed along each sharded dimension. All of this is checked before anything moves, and an error
     * names the device, its shape and the expected one.
     *
     * <p>Replicas are taken as given (PyTorch's {@code run_check=False}); with {@code checkReplicas} the replicas along
     * every replicated mesh dimension are compared first and the first device whose tensor differs is named. In thread
     * mode every device keeps a reference to its tensor, not a copy: later writes to it show in the distributed tensor,
     * as with PyTorch's {@code from_local}, except where a tensor shares memory with an earlier device's (one tensor
     * given for several replicas): those devices get a copy, so that every device owns its memory, as separate ranks do.
     * In per-device-process mode each worker receives a copy of its own tensor only. The caller keeps its tensors.
     *
     * @throws IllegalArgumentException for a wrong count, dtype, device kind, shape or differing replica
     */
    public DTensor fromLocal(List<Tensor> locals, DeviceMesh mesh, long[] shape, boolean checkReplicas, Placement... placements) {
        Objects.requireNonNull(mesh, "fromLocal: mesh is null");
        checkKind("fromLocal", mesh);
        return LocalShards.fromLocal(this, locals, new Sharding(mesh, placementsFor("fromLocal", mesh, placements)), shape, checkReplicas);
    }

    // ---- pipeline edges -----------------------------------------------------------------------------------

    /** {@link #channel(DeviceMesh, DeviceMesh, Duration)} with the runtime's timeout. */
    public ChannelEdge channel(DeviceMesh source, DeviceMesh target) {
        return channel(source, target, runtime.options().timeout());
    }

    /**
     * Declares a pipeline edge from {@code source} to {@code target}: until the returned handle closes, every
     * {@code redistribute} from exactly that mesh onto exactly that one goes through a WorkerTensorChannel whose waits
     * end after {@code timeout} (docs/decisions.md 375-379). The channel's control region is made here, now.
     *
     * @throws IllegalArgumentException if the meshes share a device, are of different kinds or not this runtime's, or, in
     *                                  a run across nodes, are not both on node 0
     * @throws IllegalStateException    if the edge is declared already
     */
    public synchronized ChannelEdge channel(DeviceMesh source, DeviceMesh target, Duration timeout) {
        checkKind("channel", Objects.requireNonNull(source, "channel: source mesh is null"));
        checkKind("channel", Objects.requireNonNull(target, "channel: target mesh is null"));
        CommOptions.validateTimeout(timeout);
        checkOnControllerNode(source, target);
        List<DeviceMesh> key = List.of(source, target);
        if (channels.containsKey(key)) {
            throw new IllegalStateException("channel: the edge " + source + " -> " + target + " is declared already ("
                + channels.get(key).options().name() + "); close it first");
        }
        ChannelOptions options = ChannelOptions.of(runtime.instanceId(), "edge" + (channelsDeclared + 1) + " " + source.deviceIds() + "->"
            + target.deviceIds(), target.count()).withTimeout(timeout);
        ChannelTransferKernel.checkMeshes(source, target, options);
        ChannelEdge edge = new ChannelEdge(this, source, target, WorkerTensorChannel.create(options));
        channelsDeclared++;
        channels.put(key, edge);
        return edge;
    }

    /**
     * A channel's control region and shared memory are made on the controller's host: across nodes, both meshes must be
     * on node 0 (docs/decisions.md 470-479).
     */
    private void checkOnControllerNode(DeviceMesh source, DeviceMesh target) {
        NodeSpec nodes = runtime.options().nodes();
        if (nodes == null) {
            return;
        }
        for (DeviceMesh mesh : List.of(source, target)) {
            for (long id : mesh.deviceIds()) {
                if (nodes.nodeOf(id) != 0) {
                    throw new IllegalArgumentException("channel: device " + id + " of " + mesh + " is on node " + nodes.nodeOf(id)
                        + "; a WorkerTensorChannel moves tensors through the shared memory of one host, so in a run across nodes both "
                        + "meshes must be on node 0 (devices " + nodes.devicesOf(0) + "); redistribute between meshes on other nodes "
                        + "without a channel");
                }
            }
        }
    }

    /** The open edge from {@code source} to {@code target}, or null if none. */
    synchronized ChannelEdge channelFor(DeviceMesh source, DeviceMesh target) {
        return channels.get(List.of(source, target));
    }

    /** {@link ChannelEdge#close()}: consumers detach, then the producer, then the channel closes. */
    void closeChannel(ChannelEdge edge) {
        closeChannel(edge, runtime.options().timeout());
    }

    /**
     * Closes {@code edge}, waiting at most {@code drainLimit} for each side's detach to run everywhere; past it the channel
     * closes anyway, which wakes any device waiting in it, and the timeout is thrown.
     */
    private void closeChannel(ChannelEdge edge, Duration drainLimit) {
        synchronized (this) {
            if (channels.get(List.of(edge.source(), edge.target())) != edge) {
                return;
            }
            channels.remove(List.of(edge.source(), edge.target()));
        }
        ChannelOptions options = edge.options();
        try {
            graph().add(new ChannelDetachSpec(options, false, edge.target().deviceIds()), List.of());
            drain(edge, "the consumers' detach", drainLimit);
            graph().add(new ChannelDetachSpec(options, true, List.of(edge.source().deviceIds().getFirst())), List.of());
            drain(edge, "the producer's detach", drainLimit);
        } finally {
            edge.channel().close();
        }
    }

    private void drain(ChannelEdge edge, String what, Duration limit) {
        if (!runtime.syncFuture().waitFor(limit)) {
            throw new CommTimeoutException("closing " + edge + ": " + what + " did not run on every device within " + Deadline.format(limit)
                + "; the channel was closed anyway");
        }
    }

    // ---- values and synchronization -------------------------------------------------------------------

    /**
     * A future of the whole tensor on one device, returned at once (seed 4.5): a distributed tensor is first
     * redistributed to the first device of its mesh; a {@code get_tensor} operator carries the promise to
     * that device's worker. The future keeps {@code t} alive until the value arrives; its {@code get()} waits
     * up to the runtime's timeout ({@link DTorchOptions.Builder#timeout}).
     */
    public TensorFuture getTensorAsync(DTensor t) {
        Objects.requireNonNull(t, "getTensorAsync: tensor is null");
        t.ensureOpen();
        aliasing.fresh(t);
        DTensor local = t;
        if (t.mesh().count() != 1) {
            // A distributed tensor on a CPU mesh of a runtime on CUDA is gathered on the GPU (decision 141).
            DeviceMesh one = DeviceMesh.of(runtime.options().deviceKind(), t.mesh().deviceIds().getFirst());
            local = t.redistribute(one, Placement.replicate());
        }
        // A host value's shape and dtype are known: a File future's getter allocates it before it sleeps (decision 252).
        ExpectedValue expected = local.mesh().kind() == DeviceKind.CPU ? new ExpectedValue(local.shape(), local.dtype()) : null;
        TensorPromise promise = runtime.newPromise(local.mesh().deviceIds().getFirst(), expected);
        TensorFuture future = promise.getFuture();
        try {
            // The tensor itself (not a gathered copy) may be written after: its value is copied, as torch's .cpu() of a
            // host tensor is not, so that to_torch() is what the tensor held at this point of the program.
            graph().add(PromiseSpec.getTensor(promise, local == t), List.of(local.operand()));
        } finally {
            if (local != t) {
                local.close();
            }
        }
        return new KeptAliveTensorFuture(future, t);
    }

    /** The seed's name for {@link #getTensorAsync(DTensor)}. */
    @SuppressWarnings("checkstyle:MethodName")
    public TensorFuture _GetTensorAsync(DTensor t) {
        return getTensorAsync(t);
    }

    /** A future that completes when every device has run everything queued so far (one per device, joined). */
    public VoidFuture syncFuture() {
        return runtime.syncFuture();
    }

    /** Blocks until every device has run everything queued so far, up to the runtime's timeout. */
    public void sync() {
        syncFuture().get();
    }

    /**
     * Writes the logical graph of the operators added since the runtime started or the last dump (the latest
     * {@value GraphHistory#DEFAULT_CAPACITY} of them) to {@code path} as Graphviz DOT: operators with their outputs' shapes
     * and mesh, edges with the placements of the tensors they pass, and the steps of every redistribution
     * (docs/observability.md). The next dump starts where this one ends, so two dumps bracket a part of the program.
     *
     * @throws UncheckedIOException if the file cannot be written (the operators of this window are not kept)
     */
    public void dumpGraph(Path path) {
        Objects.requireNonNull(path, "dumpGraph: path is null");
        String dot = GraphDot.format(graph().history().drain());
        try {
            Files.writeString(path, dot);
        } catch (IOException e) {
            throw new UncheckedIOException("dumpGraph: cannot write " + path + ": " + e.getMessage(), e);
        }
    }

    // ---- memory ------------------------------------------------------------------------------------------------

    /**
     * The memory of device {@code device} (an id of this runtime) once it ran everything queued so far: live and peak
     * bytes of its tensors, of shared memory and of CUDA memory ({@link MemoryStats}, docs/observability.md). Waits up
     * to the runtime's timeout.
     *
     * @throws IllegalArgumentException if the runtime has no such device
     */
    public MemoryStats memoryStats(long device) {
        return runtime.memoryStats(device);
    }

    /**
     * Starts the peaks of {@link #memoryStats} of {@code device} again from the live values and returns the statistics
     * after that; the shared-memory and CUDA IPC peaks belong to the process, so in thread mode every device's restart.
     */
    public MemoryStats resetPeakMemoryStats(long device) {
        return runtime.resetPeakMemoryStats(device);
    }

    // ---- any ATen operator ------------------------------------------------------------------------------

    /**
     * Runs {@code call} (an ATen operator overload with its non-tensor arguments) on distributed tensors, one per tensor
     * input: every device runs it on its local shards through libtorch's dispatcher ({@link AtenSpec}). The operator's
     * {@link ShardingStrategy} ({@link StrategyTable}) says which input placements that works for; inputs with other
     * placements are first redistributed there (the planner's cheapest plan), and the intermediate tensors released
     * once used (unless the strict mode is on: {@link #setImplicitRedistribution}). An operator in no family runs on
     * replicated inputs, with a warning once per operator naming the communication ({@link FallbackWarnings}).
     *
     * <p>An in-place overload ({@code add_}) writes into its first input, which keeps its placements ({@link InPlaceSpec};
     * where no shard can take its part of the result, the functional result is computed and copied back), and returns
     * that input; an {@code out=} overload writes into its {@code out} tensors and returns them.
     *
     * @return one tensor per output of the operator
     * @throws UnsupportedOperationException for random operators and operators whose outputs cannot be inferred exactly
     * @throws IllegalArgumentException      when the inputs do not fit the operator (libtorch's message)
     */
    public List<DTensor> aten(AtenCall call, DTensor... inputs) {
        Objects.requireNonNull(call, "aten: call is null");
        Overload overload = call.overload();
        if (InPlaceSpec.isInPlace(overload)) {
            Objects.requireNonNull(inputs, () -> call.qualifiedName() + ": inputs is null");
            if (inputs.length == 0 || inputs[0] == null) {
                throw new NullPointerException(call.qualifiedName() + ": input 0 is null");
            }
            InPlaceSpec spec = new InPlaceSpec(call);
            DTensor[] others = Arrays.copyOfRange(inputs, 1, inputs.length);
            List<TensorMeta> metas = new ArrayList<>(inputs.length);
            for (DTensor t : inputs) {
                metas.add(Objects.requireNonNull(t, () -> call.qualifiedName() + ": an input is null").meta());
            }
            if (!spec.keepsPlacements(metas) && implicit.enabled()) {
                // No shard can take its own part of the result where it is (a non-linear operator on partial sums, a
                // dimension the operator mixes): the result is computed out of place and copied back, moved to the
                // tensor's placements.
                spec.check(metas);
                List<DTensor> result = applyMulti(new AtenSpec(spec.functional()), inputs);
                try {
                    write(CopySpec.INSTANCE, inputs[0], result.getFirst());
                } finally {
                    result.forEach(DTensor::close);
                }
            } else {
                write(spec, inputs[0], others);
            }
            return List.of(inputs[0]);
        }
        if (!overload.mutatedParams().isEmpty()) {
            return OutVariants.run(this, call, inputs);
        }
        return applyMulti(new AtenSpec(call), inputs);
    }

    /**
     * Adds {@code spec}, an operator that writes into {@code target} (its first input) in place and has no output, after
     * moving the other inputs where it needs them; then counts the write, so that views of {@code target} follow it.
     */
    void write(OpSpec spec, DTensor target, DTensor... others) {
        Objects.requireNonNull(target, () -> spec.name() + ": the tensor written is null");
        target.ensureOpen();
        aliasing.checkWritable(target, spec.name());
        DTensor[] inputs = new DTensor[others.length + 1];
        inputs[0] = target;
        System.arraycopy(others, 0, inputs, 1, others.length);
        applyNoOutput(spec, inputs);
        aliasing.written(target);
    }

    /**
     * {@code t[region] = value} in place: each device writes the part of the region in its own shard, so a write of one
     * row touches one row's bytes ({@link RegionWriteSpec}); {@code value} broadcasts to the region's shape and is moved
     * where the devices need it.
     */
    public void setRegion(DTensor t, Region region, DTensor value) {
        write(RegionWriteSpec.ofTensor(Objects.requireNonNull(region, "setitem: region is null")), t,
            Objects.requireNonNull(value, "setitem: value is null"));
    }

    /** {@code t[region] = value} in place, for a number. */
    public void setRegion(DTensor t, Region region, double value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }

    /** {@code t[region] = value} in place, for an exact integer. */
    public void setRegion(DTensor t, Region region, long value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }

    /** {@code t[region] = value} in place, for a bool. */
    public void setRegion(DTensor t, Region region, boolean value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }

    /**
     * Whether operators redistribute inputs whose placements fit none of their strategies (the default, as PyTorch
     * DTensor does), or refuse them, naming the placements they take (the strict mode, {@code false}): then every
     * collective is one the program wrote. Applies to the operators added after the call.
     */
    public void setImplicitRedistribution(boolean enabled) {
        implicit.setEnabled(enabled);
    }

    /** True unless the strict mode is on ({@link #setImplicitRedistribution}). */
    public boolean implicitRedistribution() {
        return implicit.enabled();
    }

    // ---- custom operators -----------------------------------------------------------------------------

    /**
     * Adds an operator of one output on {@code inputs} and returns its handle. An operator that chooses its input
     * placements ({@link org.dtorch.ops.PlacementChoice}) gets its inputs redistributed there first, unless the strict
     * mode is on ({@link #setImplicitRedistribution}).
     */
    public DTensor apply(OpSpec spec, DTensor... inputs) {
        return applyMulti(spec, inputs).getFirst();
    }

    /** Adds an operator and returns handles of all its outputs, its inputs fitted as {@link #apply} fits them. */
    public List<DTensor> applyMulti(OpSpec spec, DTensor... inputs) {
        try (ImplicitRedistribution.Fitted fitted = implicit.fit(Objects.requireNonNull(spec, "apply: spec is null"), inputs)) {
            List<DTensor> outputs = new ArrayList<>();
            for (Operand o : graph().add(spec, operands(spec, fitted.inputs()))) {
                outputs.add(new DTensor(this, o));
            }
            aliasing.outputsOf(spec, inputs, fitted.inputs(), outputs);
            return outputs;
        }
    }

    void applyNoOutput(OpSpec spec, DTensor... inputs) {
        try (ImplicitRedistribution.Fitted fitted = implicit.fit(Objects.requireNonNull(spec, "apply: spec is null"), inputs)) {
            List<Operand> outputs = graph().add(spec, operands(spec, fitted.inputs()));
            if (!outputs.isEmpty()) {
                throw new IllegalStateException(spec.name() + " unexpectedly has outputs");
            }
        }
    }

    private List<Operand> operands(OpSpec spec, DTensor[] inputs) {
        Objects.requireNonNull(spec, "apply: spec is null");
        Objects.requireNonNull(inputs, () -> spec.name() + ": inputs is null");
        List<Operand> operands = new ArrayList<>(inputs.length);
        for (int i = 0; i < inputs.length; i++) {
            DTensor t = Objects.requireNonNull(inputs[i], spec.name() + ": input " + i + " is null");
            if (t.runtime() != this) {
                throw new IllegalArgumentException("tensor " + t + " belongs to another runtime");
            }
            aliasing.fresh(t);
            operands.add(DTensor.operandOf(t));
        }
        return operands;
    }

    private Sharding sharding(String op, DeviceMesh mesh, Placement[] placements) {
        Objects.requireNonNull(mesh, op + ": mesh is null");
        checkKind(op, mesh);
        return new Sharding(mesh, placementsFor(op, mesh, placements));
    }

    /** {@code placements}, or {@code R} on every mesh dimension if there are none; a null one is named. */
    static List<Placement> placementsFor(String op, DeviceMesh mesh, Placement[] placements) {
        Objects.requireNonNull(mesh, op + ": mesh is null");
        if (placements == null || placements.length == 0) {
            return Collections.nCopies(mesh.ndim(), Placement.replicate());
        }
        return nonNullElements(op, "placements", placements);
    }

    /** {@code values} as a list, or a {@link NullPointerException} naming the first null one. */
    @SafeVarargs
    static <T> List<T> nonNullElements(String op, String name, T... values) {
        Objects.requireNonNull(values, op + ": " + name + " is null");
        for (int i = 0; i < values.length; i++) {
            Objects.requireNonNull(values[i], op + ": " + name + "[" + i + "] is null");
        }
        return List.of(values);
    }

    /**
     * Stops the runtime: the edges still open close first ({@link ChannelEdge#close()}, each side's detach given the
     * shutdown timeout), queued work runs (up to the shutdown timeout), then every thread stops. Idempotent.
     */
    @Override
    public void close() {
        List<ChannelEdge> open;
        synchronized (this) {
            open = List.copyOf(channels.values());
        }
        for (ChannelEdge edge : open) {
            try {
                closeChannel(edge, runtime.options().shutdownTimeout());
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "closing " + edge + " while the runtime closes: " + e);
            }
        }
        runtime.close();
        writeTrace();
    }

    /**
     * The profiler of this runtime: {@code start()}, run, {@code stop()}, then {@code export(path)} or {@code table()}
     * (docs/observability.md). It records the whole process, and one profiler records at a time. With
     * {@link DTorchOptions.Builder#trace} it is already recording, until {@link #close()}.
     */
    public Profiler profiler() {
        return profiler;
    }

    /** Stops the recording {@link DTorchOptions.Builder#trace} started, once, and writes it. */
    private synchronized void writeTrace() {
        Path path = tracePath;
        if (path == null) {
            return;
        }
        tracePath = null;
        if (profiler.isRecording()) {
            profiler.stop();
        }
        try {
            profiler.export(path);
        } catch (IOException e) {
            throw new UncheckedIOException("DTorch.close: cannot write the trace to " + path + ": " + e.getMessage(), e);
        }
    }

    /** The device kind of this runtime. */
    public DeviceKind deviceKind() {
        return runtime.options().deviceKind();
    }
}
