package org.dtorch.api;

import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.GraphHistory;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.EagerRuntime;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.trace.Profiler;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.FallbackWarnings;
import org.dtorch.ops.InPlaceSpec;
import org.dtorch.ops.LocalForeachSpec;
import org.dtorch.ops.RedistributeSpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RegionWriteSpec;
import org.dtorch.ops.ShardingStrategy;
import org.dtorch.ops.StrategyTable;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.Overload;

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
    private final EagerRuntime runtime;
    private final DeviceMesh defaultMesh;
    /** Moves operators' inputs to placements they take, unless the strict mode is on. */
    private final ImplicitRedistribution implicit;
    /** Keeps views sharing memory with their bases, or following them. */
    private final Aliasing aliasing = new Aliasing(this);
    /** Memory statistics, graph dumps, the profiler and the trace written at close. */
    private final Diagnostics diagnostics;
    private final Factories factories = new Factories(this);
    /** Adds operators: fits their inputs, wraps their outputs. */
    private final Operators operators;
    /** In-place writes, which keep the written tensor's placements. */
    private final Writes writes;
    /** The declared pipeline edges. */
    private final Channels channels = new Channels(this);
    /** Futures of tensors' values and of the devices' progress. */
    private final Values values;
    /** Records operators on tensors that require grad, and runs backward passes. */
    private final GradTape tape = new GradTape(this);

    private DTorch(DTorchOptions options) {
        this.implicit = new ImplicitRedistribution(this, options.implicitRedistribution());
        this.operators = new Operators(this, implicit, aliasing);
        this.writes = new Writes(this, implicit, aliasing);
        this.values = new Values(this, aliasing);
        this.diagnostics = new Diagnostics(this, options.trace().orElse(null));
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
            diagnostics.abandonTrace();
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
     * the host memory of the same workers, where factories, {@code tensor()}, {@code toTorch()} and moves to and from
     * CUDA meshes run (the other operators' kernels place their outputs on the workers' GPUs).
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

    /** {@code mesh}, refused unless it is of this runtime's kind, or of host memory in a runtime on CUDA. */
    DeviceMesh checkKind(String op, DeviceMesh mesh) {
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
        return factories.of(FactorySpec.Kind.ZEROS, "zeros", shape, dtype, mesh, placements);
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
        return factories.of(FactorySpec.Kind.ONES, "ones", shape, dtype, mesh, placements);
    }

    /** An uninitialized tensor on the default mesh, replicated, float32. */
    public DTensor empty(long... shape) {
        return empty(shape, ScalarType.Float, defaultMesh);
    }

    /** An uninitialized tensor of {@code dtype}. */
    public DTensor empty(long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.of(FactorySpec.Kind.EMPTY, "empty", shape, dtype, mesh, placements);
    }

    /** A tensor filled with {@code value}, float32. */
    public DTensor full(double value, long[] shape, DeviceMesh mesh, Placement... placements) {
        return full(value, shape, ScalarType.Float, mesh, placements);
    }

    /** A tensor of {@code dtype} filled with {@code value} (a NaN or a value out of an integral dtype's range is refused). */
    public DTensor full(double value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.full(value, shape, dtype, mesh, placements);
    }

    /** A tensor of {@code dtype} filled with the exact integer {@code value} (one out of the dtype's range is refused). */
    public DTensor full(long value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.full(value, shape, dtype, mesh, placements);
    }

    /** {@code 0, 1, ..., end - 1} as int64 on the default mesh, replicated. */
    public DTensor arange(long end) {
        return arange(0, end, 1, ScalarType.Long, defaultMesh);
    }

    /** {@code start, start + step, ...} below {@code end} (above it for a negative step), as a 1-D tensor of {@code dtype}. */
    public DTensor arange(double start, double end, double step, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.arange(start, end, step, dtype, mesh, placements);
    }

    /** {@code start, start + step, ...} below {@code end} (above it for a negative step), computed in exact integers. */
    public DTensor arange(long start, long end, long step, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.arange(start, end, step, dtype, mesh, placements);
    }

    /** Uniform values in [0, 1), float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor rand(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return factories.random(FactorySpec.Kind.RAND, "rand", seed, shape, ScalarType.Float, mesh, placements);
    }

    /** Standard normal values, float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return randn(seed, shape, ScalarType.Float, mesh, placements);
    }

    /** Standard normal values of {@code dtype}; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return factories.random(FactorySpec.Kind.RANDN, "randn", seed, shape, dtype, mesh, placements);
    }

    /** A distributed copy of a CPU torch tensor (the caller keeps its own). */
    public DTensor tensor(Tensor data, DeviceMesh mesh, Placement... placements) {
        return factories.tensor(data, mesh, placements);
    }

    /** A float32 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(float[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return factories.tensor(data, shape, mesh, placements);
    }

    /** A float64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(double[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return factories.tensor(data, shape, mesh, placements);
    }

    /** An int64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(long[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return factories.tensor(data, shape, mesh, placements);
    }

    // ---- operators taking several tensors -------------------------------------------------------------

    /** {@code x W^T}: a linear layer without bias ({@code weight: [out, in]}), as {@link #linear(DTensor, DTensor, DTensor)}. */
    public DTensor linear(DTensor x, DTensor weight) {
        return operators.linear(x, weight);
    }

    /**
     * {@code x W^T + b}: a linear layer ({@code weight: [out, in]}, {@code bias: [out]}) through the generic operator
     * ({@link #aten}): column-parallel ({@code R, S(0), S(0)}) gives {@code S(last)}, row-parallel ({@code S(last), S(1)})
     * {@code P(sum)} with the bias made partial so the reduction adds it once; other placements are redistributed the
     * cheapest way first.
     */
    public DTensor linear(DTensor x, DTensor weight, DTensor bias) {
        return operators.linear(x, weight, bias);
    }

    /**
     * The concatenation of {@code tensors} along {@code dim} (negative counts from the end): {@code aten::cat} through
     * {@link #aten}, so inputs sharded alike on another dimension stay sharded and the concatenation dimension is
     * gathered first.
     */
    public DTensor cat(List<DTensor> tensors, int dim) {
        return operators.cat(tensors, dim);
    }

    // ---- where, and tensors from every device's local tensor ----------------------------------------------------

    /**
     * {@code a} where {@code condition} (bool) is true, else {@code b}, broadcasting the three: {@code aten::where}
     * through {@link #aten} (element-wise placements); the dtype is torch's promotion of {@code a} and {@code b}.
     */
    public DTensor where(DTensor condition, DTensor a, DTensor b) {
        return operators.where("T,T,T", null, condition, a, b);
    }

    /** {@code a} where {@code condition} is true, else the number {@code b}. */
    public DTensor where(DTensor condition, DTensor a, double b) {
        return operators.where("T,T,f", b, condition, a);
    }

    /** {@code a} where {@code condition} is true, else the exact integer {@code b}. */
    public DTensor where(DTensor condition, DTensor a, long b) {
        return operators.where("T,T,i", b, condition, a);
    }

    /** The number {@code a} where {@code condition} is true, else {@code b}. */
    public DTensor where(DTensor condition, double a, DTensor b) {
        return operators.where("T,f,T", a, condition, b);
    }

    /** The exact integer {@code a} where {@code condition} is true, else {@code b}. */
    public DTensor where(DTensor condition, long a, DTensor b) {
        return operators.where("T,i,T", a, condition, b);
    }

    /** {@code a} where {@code condition} is true, else {@code b}: a float32 tensor of the condition's shape and placements. */
    public DTensor where(DTensor condition, double a, double b) {
        return operators.where(condition, "T,f,f", a, b);
    }

    /** {@code a} where {@code condition} is true, else {@code b}: an int64 tensor of the condition's shape and placements. */
    public DTensor where(DTensor condition, long a, long b) {
        return operators.where(condition, "T,i,i", a, b);
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
        return factories.fromLocal(locals, mesh, shape, checkReplicas, placements);
    }

    // ---- pipeline edges -----------------------------------------------------------------------------------

    /** {@link #channel(DeviceMesh, DeviceMesh, Duration)} with the runtime's timeout. */
    public ChannelEdge channel(DeviceMesh source, DeviceMesh target) {
        return channel(source, target, runtime.options().timeout());
    }

    /**
     * Declares a pipeline edge from {@code source} to {@code target}: until the returned handle closes, every
     * {@code redistribute} from exactly that mesh onto exactly that one goes through a WorkerTensorChannel whose waits
     * end after {@code timeout}: a pipeline declares each edge, so that no move is routed through a channel it did not ask
     * for. The channel's control region is made here, now, in this process.
     *
     * @throws IllegalArgumentException if the meshes share a device, are of different kinds or not this runtime's, or, in
     *                                  a run across nodes, are not both on node 0
     * @throws IllegalStateException    if the edge is declared already
     */
    public ChannelEdge channel(DeviceMesh source, DeviceMesh target, Duration timeout) {
        return channels.declare(source, target, timeout);
    }

    /** The open edge from {@code source} to {@code target}, or null if none. */
    ChannelEdge channelFor(DeviceMesh source, DeviceMesh target) {
        return channels.channelFor(source, target);
    }

    /** {@link ChannelEdge#close()}: consumers detach, then the producer, then the channel closes. */
    void closeChannel(ChannelEdge edge) {
        channels.close(edge, runtime.options().timeout());
    }

    // ---- values and synchronization -------------------------------------------------------------------

    /**
     * A future of the whole tensor on one device, returned at once, so that the client never waits for a kernel: a
     * distributed tensor is first redistributed to the first device of its mesh; a {@code get_tensor} operator carries
     * the promise to that device's worker. The future keeps {@code t} alive until the value arrives; its {@code get()} waits
     * up to the runtime's timeout ({@link DTorchOptions.Builder#timeout}).
     */
    public TensorFuture getTensorAsync(DTensor t) {
        return values.getTensorAsync(t);
    }

    /** The name of the original DTorch API for {@link #getTensorAsync(DTensor)}, for programs ported from it. */
    @SuppressWarnings("checkstyle:MethodName")
    public TensorFuture _GetTensorAsync(DTensor t) {
        return getTensorAsync(t);
    }

    /** A future that completes when every device has run everything queued so far (one per device, joined). */
    public VoidFuture syncFuture() {
        return values.syncFuture();
    }

    /** Blocks until every device has run everything queued so far, up to the runtime's timeout. */
    public void sync() {
        values.sync();
    }

    // ---- diagnostics ------------------------------------------------------------------------------------------

    /**
     * Writes the logical graph of the operators added since the runtime started or the last dump (the latest
     * {@value GraphHistory#DEFAULT_CAPACITY} of them) to {@code path} as Graphviz DOT: operators with their outputs' shapes
     * and mesh, edges with the placements of the tensors they pass, and the steps of every redistribution
     * (docs/observability.md). The next dump starts where this one ends, so two dumps bracket a part of the program.
     *
     * @throws UncheckedIOException if the file cannot be written (the operators of this window are not kept)
     */
    public void dumpGraph(Path path) {
        diagnostics.dumpGraph(path);
    }

    /**
     * The memory of device {@code device} (an id of this runtime) once it ran everything queued so far: live and peak
     * bytes of its tensors, of shared memory and of CUDA memory ({@link MemoryStats}, docs/observability.md). Waits up
     * to the runtime's timeout.
     *
     * @throws IllegalArgumentException if the runtime has no such device
     */
    public MemoryStats memoryStats(long device) {
        return diagnostics.memoryStats(device);
    }

    /**
     * Starts the peaks of {@link #memoryStats} of {@code device} again from the live values and returns the statistics
     * after that; the shared-memory and CUDA IPC peaks belong to the process, so in thread mode every device's restart.
     */
    public MemoryStats resetPeakMemoryStats(long device) {
        return diagnostics.resetPeakMemoryStats(device);
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
     * <p>A multi-tensor in-place overload ({@code _foreach_mul_}, {@code _fused_adamw_}) runs on every device over its own
     * shards of all the tensors, with no communication ({@link LocalForeachSpec}): an optimizer step of distributed
     * parameters. An in-place overload ({@code add_}) writes into its first input, which keeps its placements ({@link InPlaceSpec};
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
        if (LocalForeachSpec.covers(call)) {
            tape.checkWrite(call.qualifiedName(), inputs);
            return tape.untracked(() -> {
                applyNoOutput(new LocalForeachSpec(call), inputs);
                return List.of();
            });
        }
        if (InPlaceSpec.isInPlace(overload)) {
            tape.checkWrite(call.qualifiedName(), inputs);
            return tape.untracked(() -> writes.inPlace(call, inputs));
        }
        if (!overload.mutatedParams().isEmpty()) {
            tape.checkWrite(call.qualifiedName(), inputs);
            return tape.untracked(() -> OutVariants.run(this, call, inputs));
        }
        return applyMulti(new AtenSpec(call), inputs);
    }

    /**
     * Adds {@code spec}, an operator that writes into {@code target} (its first input) in place and has no output, after
     * moving the other inputs where it needs them; then counts the write, so that views of {@code target} follow it.
     */
    void write(OpSpec spec, DTensor target, DTensor... others) {
        tape.checkWrite(spec.name(), target);
        tape.checkWrite(spec.name(), others);
        tape.untracked(() -> {
            writes.write(spec, target, others);
            return null;
        });
    }

    /**
     * {@code t[region] = value} in place: each device writes the part of the region in its own shard, so a write of one
     * row touches one row's bytes ({@link RegionWriteSpec}); {@code value} broadcasts to the region's shape and is moved
     * where the devices need it.
     */
    public void setRegion(DTensor t, Region region, DTensor value) {
        tape.checkWrite("setitem", t, value);
        tape.untracked(() -> {
            writes.setRegion(t, region, value);
            return null;
        });
    }

    /** {@code t[region] = value} in place, for a number. */
    public void setRegion(DTensor t, Region region, double value) {
        tape.checkWrite("setitem", t);
        writes.setRegion(t, region, value);
    }

    /** {@code t[region] = value} in place, for an exact integer. */
    public void setRegion(DTensor t, Region region, long value) {
        tape.checkWrite("setitem", t);
        writes.setRegion(t, region, value);
    }

    /** {@code t[region] = value} in place, for a bool. */
    public void setRegion(DTensor t, Region region, boolean value) {
        tape.checkWrite("setitem", t);
        writes.setRegion(t, region, value);
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
        return tape.recorded(spec, inputs, () -> operators.applyMulti(spec, inputs));
    }

    /**
     * {@code source} moved by {@code spec} where the move changes no device's tensor: a handle of the same device
     * tensors under the target's placements ({@link GraphConstructor#alias}), recorded for autograd as the move.
     */
    DTensor alias(RedistributeSpec spec, DTensor source) {
        TensorMeta meta = spec.inferOutputs(List.of(source.meta())).getFirst();
        DTensor[] inputs = {source};
        return tape.recorded(spec, inputs, () -> List.of(new DTensor(this, graph().alias(source.operand(), meta), source.storage())))
            .getFirst();
    }

    /**
     * The autograd tape of this runtime: grad mode, backward passes and {@code torch.autograd.grad} on distributed
     * tensors ({@link GradTape}); the per-tensor state is on {@link DTensor} ({@link DTensor#requiresGrad_}).
     */
    public GradTape autograd() {
        return tape;
    }

    void applyNoOutput(OpSpec spec, DTensor... inputs) {
        operators.applyNoOutput(spec, inputs);
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
        channels.closeAll(runtime.options().shutdownTimeout());
        runtime.close();
        diagnostics.writeTrace();
    }

    /**
     * The profiler of this runtime: {@code start()}, run, {@code stop()}, then {@code export(path)} or {@code table()}
     * (docs/observability.md). It records the whole process, and one profiler records at a time. With
     * {@link DTorchOptions.Builder#trace} it is already recording, until {@link #close()}.
     */
    public Profiler profiler() {
        return diagnostics.profiler();
    }

    /** The device kind of this runtime. */
    public DeviceKind deviceKind() {
        return runtime.options().deviceKind();
    }
}
