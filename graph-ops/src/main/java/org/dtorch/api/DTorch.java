package org.dtorch.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.GraphConstructor;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.runtime.EagerRuntime;
import org.dtorch.core.runtime.GetTensorSpec;
import org.dtorch.ops.CatSpec;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.FromTensorSpec;
import org.dtorch.ops.LinearSpec;

/**
 * The entry point: {@link #init(DTorchOptions)} starts a runtime (a controller thread and one worker thread
 * per device) and returns the handle through which the client makes tensors and runs operators. The client
 * never waits for a kernel; it reads values through futures.
 *
 * <p>Factories take a shape, optionally a dtype (default float32), a mesh and placements (none means
 * {@code R} on every mesh dimension; the short forms use the default mesh).
 *
 * <p>Not thread-safe: one client thread builds the graph (program order is call order). {@link #close()}
 * may be called from any thread.
 */
public final class DTorch implements AutoCloseable {
    private final EagerRuntime runtime;
    private final DeviceMesh defaultMesh;

    private DTorch(DTorchOptions options) {
        this.runtime = EagerRuntime.start(options.runtime());
        DeviceMesh mesh;
        try {
            mesh = DeviceMesh.initDeviceMesh(options.runtime().deviceKind(), options.meshShape(), options.meshDimNames());
        } catch (RuntimeException e) {
            runtime.close();
            throw e;
        }
        this.defaultMesh = mesh;
    }

    /**
     * Starts a runtime.
     *
     * @throws UnsupportedOperationException for GPUs, until their issue lands
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
        return DeviceMesh.initDeviceMesh(runtime.options().deviceKind(), shape, List.of(dimNames));
    }

    /** A 1-D mesh of the given devices. */
    public DeviceMesh mesh(long... deviceIds) {
        return DeviceMesh.of(runtime.options().deviceKind(), deviceIds);
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
        return apply(FactorySpec.of(FactorySpec.Kind.ZEROS, shape, dtype, sharding(mesh, placements)));
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
        return apply(FactorySpec.of(FactorySpec.Kind.ONES, shape, dtype, sharding(mesh, placements)));
    }

    /** An uninitialized tensor on the default mesh, replicated, float32. */
    public DTensor empty(long... shape) {
        return empty(shape, ScalarType.Float, defaultMesh);
    }

    /** An uninitialized tensor of {@code dtype}. */
    public DTensor empty(long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.of(FactorySpec.Kind.EMPTY, shape, dtype, sharding(mesh, placements)));
    }

    /** A tensor filled with {@code value}, float32. */
    public DTensor full(double value, long[] shape, DeviceMesh mesh, Placement... placements) {
        return full(value, shape, ScalarType.Float, mesh, placements);
    }

    /** A tensor of {@code dtype} filled with {@code value}. */
    public DTensor full(double value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.full(value, shape, dtype, sharding(mesh, placements)));
    }

    /** {@code 0, 1, ..., end - 1} as int64 on the default mesh, replicated. */
    public DTensor arange(long end) {
        return arange(0, end, 1, ScalarType.Long, defaultMesh);
    }

    /** {@code start, start + step, ...} below {@code end}, as a 1-D tensor of {@code dtype}. */
    public DTensor arange(double start, double end, double step, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.arange(start, end, step, dtype, sharding(mesh, placements)));
    }

    /** Uniform values in [0, 1), float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor rand(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.random(FactorySpec.Kind.RAND, seed, shape, ScalarType.Float, sharding(mesh, placements)));
    }

    /** Standard normal values, float32; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, DeviceMesh mesh, Placement... placements) {
        return randn(seed, shape, ScalarType.Float, mesh, placements);
    }

    /** Standard normal values of {@code dtype}; the same {@code seed} gives the same global values on any mesh. */
    public DTensor randn(long seed, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement... placements) {
        return apply(FactorySpec.random(FactorySpec.Kind.RANDN, seed, shape, dtype, sharding(mesh, placements)));
    }

    /** A distributed copy of a CPU torch tensor (the caller keeps its own). */
    public DTensor tensor(Tensor data, DeviceMesh mesh, Placement... placements) {
        return apply(new FromTensorSpec(data, sharding(mesh, placements)));
    }

    /** A float32 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(float[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return fromPointer(new FloatPointer(data), data.length, ScalarType.Float, shape, mesh, placements);
    }

    /** A float64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(double[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return fromPointer(new DoublePointer(data), data.length, ScalarType.Double, shape, mesh, placements);
    }

    /** An int64 tensor of {@code shape} from {@code data} in row-major order. */
    public DTensor tensor(long[] data, long[] shape, DeviceMesh mesh, Placement... placements) {
        return fromPointer(new LongPointer(data), data.length, ScalarType.Long, shape, mesh, placements);
    }

    private DTensor fromPointer(Pointer data, long length, ScalarType dtype, long[] shape, DeviceMesh mesh, Placement... placements) {
        long numel = Arrays.stream(shape).reduce(1, (a, b) -> a * b);
        if (numel != length) {
            throw new IllegalArgumentException("tensor: " + length + " values do not fill shape " + Arrays.toString(shape));
        }
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(dtype));
             Tensor view = torch.from_blob(data, shape, options)) {
            Tensor owned = view.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
            return apply(FromTensorSpec.owning(owned, sharding(mesh, placements)));
        }
    }

    // ---- operators taking several tensors -------------------------------------------------------------

    /** {@code x W^T}: a linear layer without bias ({@code weight: [out, in]}). */
    public DTensor linear(DTensor x, DTensor weight) {
        return apply(new LinearSpec(false), x, weight);
    }

    /** {@code x W^T + b}: a linear layer ({@code weight: [out, in]}, {@code bias: [out]}). */
    public DTensor linear(DTensor x, DTensor weight, DTensor bias) {
        return apply(new LinearSpec(true), x, weight, bias);
    }

    /** The concatenation of {@code tensors} along {@code dim}. */
    public DTensor cat(List<DTensor> tensors, int dim) {
        return apply(new CatSpec(dim), tensors.toArray(DTensor[]::new));
    }

    // ---- values and synchronization -------------------------------------------------------------------

    /**
     * A future of the whole tensor on one device, returned at once (seed 4.5): a distributed tensor is first
     * redistributed to the first device of its mesh; a {@code get_tensor} operator carries the promise to
     * that device's worker. The future keeps {@code t} alive until the value arrives; its {@code get()} waits
     * up to the runtime's timeout ({@link DTorchOptions.Builder#timeout}).
     */
    public TensorFuture getTensorAsync(DTensor t) {
        Objects.requireNonNull(t, "tensor");
        DTensor local = t;
        if (t.mesh().count() != 1) {
            DeviceMesh one = DeviceMesh.of(t.mesh().kind(), t.mesh().deviceIds().getFirst());
            local = t.redistribute(one, Placement.replicate());
        }
        TensorPromise promise = TensorPromises.create(runtime.promiseType(), runtime.options().timeout());
        TensorFuture future = promise.getFuture();
        try {
            graph().add(new GetTensorSpec(promise), List.of(local.operand()));
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

    // ---- custom operators -----------------------------------------------------------------------------

    /** Adds an operator of one output on {@code inputs} and returns its handle. */
    public DTensor apply(OpSpec spec, DTensor... inputs) {
        Operand output = graph().addSingle(spec, operands(inputs));
        return new DTensor(this, output);
    }

    /** Adds an operator and returns handles of all its outputs. */
    public List<DTensor> applyMulti(OpSpec spec, DTensor... inputs) {
        List<DTensor> outputs = new ArrayList<>();
        for (Operand o : graph().add(spec, operands(inputs))) {
            outputs.add(new DTensor(this, o));
        }
        return outputs;
    }

    void applyNoOutput(OpSpec spec, DTensor... inputs) {
        List<Operand> outputs = graph().add(spec, operands(inputs));
        if (!outputs.isEmpty()) {
            throw new IllegalStateException(spec.name() + " unexpectedly has outputs");
        }
    }

    private List<Operand> operands(DTensor[] inputs) {
        List<Operand> operands = new ArrayList<>(inputs.length);
        for (DTensor t : inputs) {
            if (t.runtime() != this) {
                throw new IllegalArgumentException("tensor " + t + " belongs to another runtime");
            }
            operands.add(DTensor.operandOf(t));
        }
        return operands;
    }

    private Sharding sharding(DeviceMesh mesh, Placement[] placements) {
        Objects.requireNonNull(mesh, "mesh");
        if (mesh.kind() != runtime.options().deviceKind()) {
            throw new IllegalArgumentException("mesh " + mesh + " is not made of this runtime's " + runtime.options().deviceKind().shortName() + " devices");
        }
        return new Sharding(mesh, placementsFor(mesh, placements));
    }

    /** {@code placements}, or {@code R} on every mesh dimension if there are none. */
    static List<Placement> placementsFor(DeviceMesh mesh, Placement[] placements) {
        if (placements == null || placements.length == 0) {
            return Collections.nCopies(mesh.ndim(), Placement.replicate());
        }
        return List.of(placements);
    }

    /** Stops the runtime: queued work runs (up to the shutdown timeout), then every thread stops. Idempotent. */
    @Override
    public void close() {
        runtime.close();
    }

    /** The device kind of this runtime. */
    public DeviceKind deviceKind() {
        return runtime.options().deviceKind();
    }
}
