package org.dtorch.polyglot;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.ChannelEdge;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.Index;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.runtime.RuntimeOptions;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.Trace;
import org.dtorch.ops.BinarySpec;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.ReduceSpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RingAttentionSpec;
import org.dtorch.ops.ScalarSpec;
import org.dtorch.ops.Shapes;
import org.dtorch.ops.UnarySpec;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.ArgSource;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.CallPlan;
import org.dtorch.ops.aten.Overload;
import org.dtorch.polyglot.torch.AtenOperator;
import org.dtorch.polyglot.torch.Dtypes;
import org.dtorch.polyglot.torch.PyTensor;
import org.dtorch.polyglot.torch.TorchModule;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * The one entry point of the Python package into a {@link DTorch} runtime. It speaks in the types Python
 * has (numbers, strings, lists) and hands out opaque {@link DTensor} and {@link DeviceMesh} handles that the
 * Python classes wrap. Placements travel as their printed form ({@code "S(0)"}, {@code "R"},
 * {@code "P(sum)"}), dtypes as PyTorch names ({@code "float32"}). Polyglot values received as arguments are
 * read during the call and never kept.
 *
 * <p>Not thread-safe beyond the runtime's own contract: the Python client thread issues operators;
 * futures may be read from any thread.
 */
public final class PyBridge {
    private final DTorch runtime;
    /** The threads that run Python callbacks of this bridge's futures; stopped by the host that closes. */
    private final PythonCallbacks callbacks = new PythonCallbacks();
    /** Set for an isolated script, which may write no file, not even through the runtime (a graph dump). */
    private volatile boolean isolated;

    /** A bridge to {@code runtime}, which the caller keeps and closes. */
    public PyBridge(DTorch runtime) {
        this.runtime = Objects.requireNonNull(runtime, "runtime");
    }

    /** Refuses what would write a file for the script: the host calls it before an isolated script runs. */
    void isolate() {
        isolated = true;
    }

    /** Stops the threads that run Python callbacks: the host calls it once its context is closed. */
    void stopCallbacks() {
        callbacks.close();
    }

    /** The runtime behind the bridge. */
    public DTorch runtime() {
        return runtime;
    }

    // ---- runtime and meshes -----------------------------------------------------------------------------

    /** {@code cpu} or {@code cuda}: the device type of the runtime. */
    @HostAccess.Export
    public String deviceType() {
        return runtime.deviceKind() == DeviceKind.CUDA ? "cuda" : "cpu";
    }

    /** The number of devices of the runtime. */
    @HostAccess.Export
    public int deviceCount() {
        return runtime.runtime().devices().size();
    }

    /** The runtime's default mesh. */
    @HostAccess.Export
    public DeviceMesh defaultMesh() {
        return runtime.defaultMesh();
    }

    /**
     * A mesh of the given device type, shape, row-major ids and optional dimension names. The ids are the runtime's
     * logical devices; on a same-device CUDA runtime, {@code 0} repeated for every rank also means ranks
     * {@code 0..n-1} on {@code cuda:0} ({@link MeshIds}).
     *
     * A CPU mesh on a CUDA runtime is the host memory of its workers (docs/decisions.md, 151).
     *
     * @throws IllegalArgumentException for a CUDA mesh on a CPU runtime (naming the launcher flag that starts one
     *                                  that has it), or ids the runtime cannot map
     */
    @HostAccess.Export
    public DeviceMesh mesh(String deviceType, Value shape, Value ids, Value names) {
        DeviceKind kind = runtimeKind(deviceType);
        RuntimeOptions options = runtime.runtime().options();
        long[] meshShape = longs(shape);
        int[] intShape = new int[meshShape.length];
        for (int i = 0; i < meshShape.length; i++) {
            intShape[i] = Math.toIntExact(meshShape[i]);
        }
        return DeviceMesh.of(kind, intShape, MeshIds.logical(kind, longs(ids), options), strings(names));
    }

    /**
     * The mesh of a {@link ParallelConfig} over the runtime's devices: its degrees in the order dp, cfg, ring, ulysses,
     * pp, tp become the dimensions of those names.
     *
     * @throws IllegalArgumentException for a degree below 1, a product other than the runtime's device count (naming
     *                                  each factor), or a device type the runtime lacks
     */
    @HostAccess.Export
    public DeviceMesh parallelMesh(String deviceType, Value degrees) {
        int[] d = java.util.Arrays.stream(longs(degrees)).mapToInt(Math::toIntExact).toArray();
        if (d.length != ParallelConfig.DIM_NAMES.size()) {
            throw new IllegalArgumentException("ParallelConfig takes " + ParallelConfig.DIM_NAMES + ", got " + d.length + " degrees");
        }
        return new ParallelConfig(d[0], d[1], d[2], d[3], d[4], d[5]).deviceMesh(runtimeKind(deviceType), deviceCount());
    }

    /** The device kind of {@code deviceType}, refused when the runtime cannot make meshes of it. */
    private DeviceKind runtimeKind(String deviceType) {
        DeviceKind kind = kindOf(deviceType);
        String mismatch = MeshIds.kindMismatch(kind, runtime.runtime().options());
        if (mismatch != null) {
            throw new IllegalArgumentException(mismatch);
        }
        return kind;
    }

    /** {@code cpu} or {@code cuda}: the device type of {@code mesh} (a CPU mesh of a CUDA runtime says {@code cpu}). */
    @HostAccess.Export
    public String meshDeviceType(DeviceMesh mesh) {
        return mesh.kind().shortName();
    }

    /** The shape of {@code mesh}. */
    @HostAccess.Export
    public long[] meshShape(DeviceMesh mesh) {
        return java.util.Arrays.stream(mesh.shape()).asLongStream().toArray();
    }

    /** The device ids of {@code mesh}, row-major. */
    @HostAccess.Export
    public long[] meshIds(DeviceMesh mesh) {
        return mesh.deviceIds().stream().mapToLong(Long::longValue).toArray();
    }

    /** The dimension names of {@code mesh} (possibly none). */
    @HostAccess.Export
    public String[] meshDimNames(DeviceMesh mesh) {
        return mesh.dimNames().toArray(String[]::new);
    }

    /** The sub-mesh over {@code names} containing {@code deviceId}. */
    @HostAccess.Export
    public DeviceMesh subMesh(DeviceMesh mesh, long deviceId, Value names) {
        return mesh.subMesh(deviceId, strings(names).toArray(String[]::new));
    }

    /** True when both meshes hold the same devices in the same arrangement. */
    @HostAccess.Export
    public boolean sameMesh(DeviceMesh a, DeviceMesh b) {
        return a.sameDevicesAs(b) && a.dimNames().equals(b.dimNames());
    }

    /** {@code DeviceMesh(cpu, [[0, 1], [2, 3]], dims=[dp, tp])}. */
    @HostAccess.Export
    public String describeMesh(DeviceMesh mesh) {
        return mesh.toString();
    }

    // ---- tensor metadata ----------------------------------------------------------------------------------

    /** The global shape. */
    @HostAccess.Export
    public long[] shape(DTensor t) {
        return t.shape();
    }

    /** The dtype's PyTorch name. */
    @HostAccess.Export
    public String dtype(DTensor t) {
        return TorchTensors.dtypeName(t.dtype());
    }

    /** The mesh. */
    @HostAccess.Export
    public DeviceMesh meshOf(DTensor t) {
        return t.mesh();
    }

    /** The placements, printed: {@code ["S(0)", "R"]}. */
    @HostAccess.Export
    public String[] placements(DTensor t) {
        return t.placements().stream().map(Placement::toString).toArray(String[]::new);
    }

    /** Releases the tensor on the workers. Idempotent. */
    @HostAccess.Export
    public void close(DTensor t) {
        t.close();
    }

    // ---- factories ----------------------------------------------------------------------------------------

    /** {@code empty}, {@code zeros}, {@code ones}, {@code rand}, {@code randn}. */
    @HostAccess.Export
    public DTensor factory(String kind, Value shape, String dtype, DeviceMesh mesh, Value placements, long seed) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        return switch (kind) {
            case "empty" -> runtime.empty(dims, type, mesh, ps);
            case "zeros" -> runtime.zeros(dims, type, mesh, ps);
            case "ones" -> runtime.ones(dims, type, mesh, ps);
            case "rand" -> runtime.apply(FactorySpec.random(FactorySpec.Kind.RAND, seed, dims, type, sharding(mesh, ps)));
            case "randn" -> runtime.randn(seed, dims, type, mesh, ps);
            default -> throw new IllegalArgumentException("unknown factory '" + kind + "'");
        };
    }

    /**
     * {@code full(shape, value)}: {@code valueKind} is the Python type of the value, {@code bool}, {@code int}
     * (an exact 64-bit integer) or {@code float}.
     */
    @HostAccess.Export
    public DTensor full(Value shape, String dtype, DeviceMesh mesh, Value placements, Value value, String valueKind) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        return switch (valueKind) {
            case "bool" -> runtime.full(value.asBoolean() ? 1L : 0L, dims, type, mesh, ps);
            case "int" -> runtime.full(exactLong("full", value), dims, type, mesh, ps);
            case "float" -> runtime.full(value.asDouble(), dims, type, mesh, ps);
            default -> throw new IllegalArgumentException("full: unknown value kind '" + valueKind + "'");
        };
    }

    /** {@code arange(start, end, step)}: in exact 64-bit integers when {@code integral}, else in double precision. */
    @HostAccess.Export
    public DTensor arange(Value start, Value end, Value step, boolean integral, String dtype, DeviceMesh mesh, Value placements) {
        ScalarType type = scalarType(dtype);
        Placement[] ps = placementArray(placements);
        if (integral) {
            return runtime.arange(exactLong("arange", start), exactLong("arange", end), exactLong("arange", step), type, mesh, ps);
        }
        return runtime.arange(asDouble(start), asDouble(end), asDouble(step), type, mesh, ps);
    }

    /**
     * A tensor from flat row-major values and a shape (Python flattens nested lists first). Integers stay exact
     * into integral dtypes; a float going into one is truncated toward zero, as in torch; a value the dtype cannot
     * hold is refused, as torch refuses it.
     */
    @HostAccess.Export
    public DTensor fromValues(Value flatValues, Value shape, String dtype, DeviceMesh mesh, Value placements) {
        long[] dims = longs(shape);
        ScalarType type = scalarType(dtype);
        int n = Math.toIntExact(flatValues.getArraySize());
        if (Shapes.numel("tensor", dims) != n) {
            throw new IllegalArgumentException("tensor: " + n + " values do not fill shape " + java.util.Arrays.toString(dims));
        }
        Tensor host;
        if (TorchTensors.dtypeName(type).startsWith("int") || type == ScalarType.Bool || type == ScalarType.Byte) {
            long[] values = new long[n];
            for (int i = 0; i < n; i++) {
                Value v = flatValues.getArrayElement(i);
                values[i] = v.isBoolean() ? (v.asBoolean() ? 1 : 0) : v.fitsInLong() ? v.asLong() : truncated("tensor", v);
            }
            host = fromPointer(new LongPointer(values), ScalarType.Long, dims, type);
            if (type != ScalarType.Bool) {
                checkRoundTrip(host, values, type);
            }
        } else {
            double[] values = new double[n];
            for (int i = 0; i < n; i++) {
                values[i] = asDouble(flatValues.getArrayElement(i));
            }
            host = fromPointer(new DoublePointer(values), ScalarType.Double, dims, type);
        }
        try (host) {
            return runtime.tensor(host, mesh, placementArray(placements));
        }
    }

    /** Refuses (closing {@code host}) values that did not survive the conversion to {@code type}: they overflowed it. */
    private static void checkRoundTrip(Tensor host, long[] values, ScalarType type) {
        long[] back = new long[values.length];
        try (Tensor asLong = host.to(ScalarType.Long); Tensor contiguous = asLong.contiguous()) {
            if (back.length > 0) {
                new LongPointer(contiguous.data_ptr()).capacity(back.length).get(back);
            }
        }
        for (int i = 0; i < values.length; i++) {
            if (back[i] != values[i]) {
                host.close();
                throw new IllegalArgumentException("tensor: the value " + values[i] + " cannot be converted to " + TorchTensors.dtypeName(type)
                    + " without overflow");
            }
        }
    }

    /**
     * A distributed tensor from a {@code torch.Tensor} Python holds (made with {@code torch}, or a value that came back):
     * each device copies its shard of it; a CUDA tensor is read through the host first.
     */
    @HostAccess.Export
    public DTensor fromTorch(PyTensor value, DeviceMesh mesh, Value placements) {
        try (Tensor t = value.torch(); Tensor host = t.is_cpu() ? new Tensor(t) : t.cpu()) {
            return runtime.tensor(host, mesh, placementArray(placements));
        }
    }

    /** Takes {@code data} (closing it), whose length the caller checked against {@code shape}. */
    private static Tensor fromPointer(org.bytedeco.javacpp.Pointer data, ScalarType sourceType, long[] shape, ScalarType target) {
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(sourceType));
             Tensor view = torch.from_blob(data, shape, options); Tensor converted = view.to(target)) {
            return converted.clone();
        }
    }

    // ---- operators ------------------------------------------------------------------------------------------

    /** {@code add}, {@code sub}, {@code mul}, {@code div} of two tensors. */
    @HostAccess.Export
    public DTensor binary(String op, DTensor a, DTensor b) {
        return runtime.apply(switch (op) {
            case "add" -> BinarySpec.ADD;
            case "sub" -> BinarySpec.SUB;
            case "mul" -> BinarySpec.MUL;
            case "div" -> BinarySpec.DIV;
            default -> throw new IllegalArgumentException("unknown binary operator '" + op + "'");
        }, a, b);
    }

    /**
     * A tensor and a Python number: {@code add}, {@code sub}, {@code mul}, {@code div}, {@code rsub}, {@code rdiv}.
     * {@code valueKind} is the number's Python type, {@code bool}, {@code int} (kept as an exact 64-bit integer)
     * or {@code float}: it decides torch's type promotion.
     */
    @HostAccess.Export
    public DTensor scalar(String op, DTensor t, Value value, String valueKind) {
        ScalarSpec.Kind kind = ScalarSpec.Kind.valueOf(op.toUpperCase(Locale.ROOT));
        return runtime.apply(switch (valueKind) {
            case "bool" -> new ScalarSpec(kind, value.asBoolean());
            case "int" -> new ScalarSpec(kind, exactLong(op, value));
            case "float" -> new ScalarSpec(kind, value.asDouble());
            default -> throw new IllegalArgumentException(op + ": unknown scalar kind '" + valueKind + "'");
        }, t);
    }

    /** {@code neg}, {@code relu}, {@code silu}, {@code gelu}, {@code exp}, {@code tanh}, {@code sigmoid}. */
    @HostAccess.Export
    public DTensor unary(String op, DTensor t) {
        return runtime.apply(UnarySpec.of(UnarySpec.Kind.valueOf(op.toUpperCase(Locale.ROOT))), t);
    }

    /** {@code sum}, {@code mean}, {@code max} over {@code dims} (all if empty or None). */
    @HostAccess.Export
    public DTensor reduce(String kind, DTensor t, Value dims, boolean keepdim) {
        int[] d = java.util.Arrays.stream(longs(dims)).mapToInt(Math::toIntExact).toArray();
        return runtime.apply(new ReduceSpec(ReduceSpec.Kind.valueOf(kind.toUpperCase(Locale.ROOT)), d, keepdim), t);
    }

    /** {@code to(dtype)}. */
    @HostAccess.Export
    public DTensor to(DTensor t, String dtype) {
        return t.to(scalarType(dtype));
    }

    /**
     * Any ATen operator on distributed tensors, by name ({@code dtorch.where(c, x, y)}, {@code t.amax(dim=1)},
     * {@code dtorch.nn.functional.hardtanh(t)}): the overload is chosen as the {@code torch} module chooses it, from
     * the signature key of the call's kinds ({@link AtenOperator#resolve}), and runs through {@link DTorch#aten}.
     *
     * @param values the call's values in the key's order: {@link DTensor}s where the key says {@code T}, lists of them
     *               where it says {@code [T]}, numbers, strings, dtype names, None and lists otherwise
     * @return the names of the operator's returns (a {@code String[]}) followed by one {@link DTensor} per return, or a
     *         {@code DTensor[]} for a {@code Tensor[]} return ({@code split}, {@code unbind})
     * @throws IllegalArgumentException when libtorch has no operator of that name
     */
    @HostAccess.Export
    public Object[] aten(String name, String key, Value values) {
        AtenOperator op = TorchModule.shared().op(name);
        if (op == null) {
            throw new IllegalArgumentException("libtorch has no operator aten::" + name);
        }
        CallPlan plan = op.resolve(key).plan();
        int n = Math.toIntExact(values.getArraySize());
        Object[] plain = new Object[n];
        for (int i = 0; i < n; i++) {
            Value v = values.getArrayElement(i);
            plain[i] = v.isHostObject() && v.asHostObject() instanceof DTensor ? null : plainValue(v);
        }
        List<DTensor> tensors = new ArrayList<>();
        List<Overload.Param> params = plan.overload().params();
        for (int i = 0; i < params.size(); i++) {
            ArgSource source = plan.sources()[i];
            if (source.kind().equals(ArgKind.TENSOR)) {
                tensors.add(distributed(name, params.get(i), values.getArrayElement(source.index())));
            } else if (source.kind().equals(ArgKind.TENSOR_LIST)) {
                Value list = values.getArrayElement(source.index());
                for (long k = 0; k < list.getArraySize(); k++) {
                    tensors.add(distributed(name, params.get(i), list.getArrayElement(k)));
                }
            } else if (!source.isDefault() && !source.isPacked() && source.kind().equals(ArgKind.DTYPE)) {
                plain[source.index()] = Dtypes.scalarType((String) plain[source.index()]);
            } else if (!source.isDefault() && !source.isPacked() && source.kind().equals(ArgKind.MEMORY_FORMAT)) {
                plain[source.index()] = ArgKind.memoryFormat((String) plain[source.index()]);
            }
        }
        List<DTensor> outputs = runtime.aten(AtenCall.of(plan, plain), tensors.toArray(DTensor[]::new));
        List<String> types = plan.overload().returnTypes();
        Object[] out = new Object[types.size() + 1];
        out[0] = plan.overload().returnNames().toArray(String[]::new);
        int listLength = outputs.size() - (types.size() - 1); // at most one Tensor[] return: it takes what the others leave
        for (int r = 0, next = 0; r < types.size(); r++) {
            if (types.get(r).equals(ArgKind.TENSOR_LIST)) {
                out[r + 1] = outputs.subList(next, next + listLength).toArray(DTensor[]::new);
                next += listLength;
            } else {
                out[r + 1] = outputs.get(next++);
            }
        }
        return out;
    }

    private static DTensor distributed(String op, Overload.Param param, Value v) {
        if (!(v.isHostObject() && v.asHostObject() instanceof DTensor t)) {
            throw new IllegalArgumentException(op + ": argument '" + param.name() + "' must be a dtorch.Tensor; "
                + "wrap local torch tensors with dtorch.Tensor(t, device_mesh=..., placements=...)");
        }
        return t;
    }

    /** A polyglot value as a plain Java value: null, Boolean, Long, Double, String, or a List of those. */
    private static Object plainValue(Value v) {
        if (v.isNull()) {
            return null;
        }
        if (v.isBoolean()) {
            return v.asBoolean();
        }
        if (v.isNumber()) {
            return v.fitsInLong() ? (Object) v.asLong() : (Object) v.asDouble();
        }
        if (v.isString()) {
            return v.asString();
        }
        if (v.hasArrayElements()) {
            List<Object> out = new ArrayList<>();
            for (long i = 0; i < v.getArraySize(); i++) {
                out.add(plainValue(v.getArrayElement(i)));
            }
            return out;
        }
        if (v.isHostObject()) {
            return v.asHostObject();
        }
        throw new IllegalArgumentException("unsupported argument " + v);
    }

    /** The move to {@code placements} on {@code mesh}. */
    @HostAccess.Export
    public DTensor redistribute(DTensor t, DeviceMesh mesh, Value placements) {
        return t.redistribute(mesh, placementArray(placements));
    }

    /** Ring attention of {@code q} against {@code k} and {@code v} moved to its placements ({@link RingAttentionSpec#attend}). */
    @HostAccess.Export
    public DTensor ringAttention(DTensor q, DTensor k, DTensor v, boolean causal) {
        return RingAttentionSpec.attend(q, k, v, causal);
    }

    /** Refuses, before anything moves, what ring attention could not take with {@code placements} on {@code mesh}. */
    @HostAccess.Export
    public void checkRingAttention(DTensor q, DTensor k, DTensor v, boolean causal, DeviceMesh mesh, Value placements) {
        new RingAttentionSpec(causal).check(q, k, v, new Sharding(mesh, List.of(placementArray(placements))));
    }

    /** Turns the implicit redistribution of operators' inputs on (the default) or off (the strict mode). */
    @HostAccess.Export
    public void setImplicitRedistribution(boolean enabled) {
        runtime.setImplicitRedistribution(enabled);
    }

    /** True unless the strict mode is on. */
    @HostAccess.Export
    public boolean implicitRedistribution() {
        return runtime.implicitRedistribution();
    }

    /**
     * {@code t[index] = value} in place, for a basic index: {@code items} holds one entry per index item, a list
     * {@code ["at", i]}, {@code ["slice", start, stop, step]} (None bounds), {@code ["none"]} or {@code ["ellipsis"]};
     * {@code value} is a {@link DTensor} or a number of {@code valueKind} ({@code bool}, {@code int}, {@code float}).
     */
    @HostAccess.Export
    public void setItem(DTensor t, Value items, Value value, String valueKind) {
        Region region = Index.region(t.shape(), indexItems(items));
        if (value.isHostObject() && value.asHostObject() instanceof DTensor v) {
            runtime.setRegion(t, region, v);
            return;
        }
        switch (valueKind) {
            case "bool" -> runtime.setRegion(t, region, value.asBoolean());
            case "int" -> runtime.setRegion(t, region, exactLong("setitem", value));
            case "float" -> runtime.setRegion(t, region, value.asDouble());
            default -> throw new IllegalArgumentException("setitem: unknown value kind '" + valueKind + "'");
        }
    }

    private static Index[] indexItems(Value items) {
        Index[] out = new Index[Math.toIntExact(items.getArraySize())];
        for (int i = 0; i < out.length; i++) {
            Value item = items.getArrayElement(i);
            String kind = item.getArrayElement(0).asString();
            out[i] = switch (kind) {
                case "at" -> Index.at(item.getArrayElement(1).asLong());
                case "slice" -> Index.slice(bound(item.getArrayElement(1)), bound(item.getArrayElement(2)), item.getArrayElement(3).asLong());
                case "none" -> Index.none();
                case "ellipsis" -> Index.ellipsis();
                default -> throw new IllegalArgumentException("setitem: unknown index item '" + kind + "'");
            };
        }
        return out;
    }

    private static Long bound(Value v) {
        return v.isNull() ? null : v.asLong();
    }

    /** {@code dst.copy_(src)}. */
    @HostAccess.Export
    public void copyInto(DTensor dst, DTensor src) {
        dst.copy_(src);
    }

    // ---- boolean indexing and the local-shard API -------------------------------------------------------------------

    /** {@code t[mask]} for a bool mask of {@code t}'s leading dimensions; blocks to read the mask's count ({@link DTensor#indexByMask}). */
    @HostAccess.Export
    public DTensor indexByMask(DTensor t, DTensor mask) {
        return t.indexByMask(mask);
    }

    /**
     * {@code Tensor.from_local}: one {@code torch.Tensor} per device of {@code mesh}, in its device order; {@code shape}
     * None infers the global shape ({@link DTorch#fromLocal(List, DeviceMesh, long[], boolean, Placement...)}).
     */
    @HostAccess.Export
    public DTensor fromLocal(Value tensors, DeviceMesh mesh, Value placements, Value shape, boolean runCheck) {
        int n = Math.toIntExact(tensors.getArraySize());
        List<Tensor> locals = new ArrayList<>(n);
        try {
            for (int i = 0; i < n; i++) {
                Value v = tensors.getArrayElement(i);
                if (!(v.isHostObject() && v.asHostObject() instanceof PyTensor t)) {
                    throw new IllegalArgumentException("from_local: tensors[" + i + "] must be a torch.Tensor, got " + v);
                }
                locals.add(t.torch());
            }
            long[] global = shape == null || shape.isNull() ? null : longs(shape);
            return runtime.fromLocal(locals, mesh, global, runCheck, placementArray(placements));
        } finally {
            locals.forEach(Tensor::close);
        }
    }

    /** {@code Tensor.to_local}: every device's local tensor, in the mesh's device order ({@link DTensor#toLocal()}). */
    @HostAccess.Export
    public PyTensor[] toLocal(DTensor t) {
        List<Tensor> locals = t.toLocal();
        PyTensor[] out = new PyTensor[locals.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = PyTensor.wrap(locals.get(i));
        }
        return out;
    }

    // ---- pipeline edges -----------------------------------------------------------------------------------------

    /** Declares the edge from {@code src} to {@code dst} ({@link DTorch#channel}); {@code timeoutSeconds} 0 means the runtime's. */
    @HostAccess.Export
    public ChannelEdge channel(DeviceMesh src, DeviceMesh dst, double timeoutSeconds) {
        return timeoutSeconds == 0 ? runtime.channel(src, dst)
            : runtime.channel(src, dst, java.time.Duration.ofNanos(Math.round(timeoutSeconds * 1e9)));
    }

    /** Closes {@code edge}: consumers, producer, then the channel ({@link ChannelEdge#close()}). */
    @HostAccess.Export
    public void closeChannel(ChannelEdge edge) {
        edge.close();
    }

    /** The redistributions routed through {@code edge} so far. */
    @HostAccess.Export
    public long channelTransfers(ChannelEdge edge) {
        return edge.transfers();
    }

    /** The name of {@code edge}'s channel. */
    @HostAccess.Export
    public String channelName(ChannelEdge edge) {
        return edge.options().name();
    }

    // ---- values -----------------------------------------------------------------------------------------------

    /** The future of the whole tensor ({@code _GetTensorAsync}); returns at once. */
    @HostAccess.Export
    public PyTensorFuture getTensorAsync(DTensor t) {
        return new PyTensorFuture(runtime.getTensorAsync(t), callbacks);
    }

    /** Blocks until every device ran everything queued so far. */
    @HostAccess.Export
    public void sync() {
        runtime.sync();
    }

    /** Writes the operators issued since the runtime started or the last dump as Graphviz DOT ({@link DTorch#dumpGraph}). */
    @HostAccess.Export
    public void dumpGraph(String path) {
        if (isolated) {
            throw new SecurityException("dump_graph: a script run with --isolated may write no file, and the dump writes " + path);
        }
        runtime.dumpGraph(java.nio.file.Path.of(path));
    }

    /**
     * The runtime's collective calls of {@code kind} so far ({@code ALL_GATHER}, {@code POINT_TO_POINT}, ...: a
     * {@link CollectiveKind}), one per device and call, for tests that assert what an operation communicated. In
     * per-device-process mode the groups live in the workers and the count stays 0.
     */
    @HostAccess.Export
    public long collectiveCount(String kind) {
        return runtime.runtime().groups().collectiveCounter().count(CollectiveKind.valueOf(kind));
    }

    // ---- memory statistics ------------------------------------------------------------------------------------

    /** The names of {@link #memoryStats}'s values, in their order ({@link MemoryStats#KEYS}). */
    @HostAccess.Export
    public String[] memoryStatKeys() {
        return MemoryStats.KEYS.toArray(String[]::new);
    }

    /** Device {@code device}'s {@link MemoryStats} once it ran everything issued so far, in the order of {@link #memoryStatKeys}. */
    @HostAccess.Export
    public long[] memoryStats(long device) {
        return runtime.memoryStats(device).values();
    }

    /** Restarts device {@code device}'s peaks from the live values; its statistics after that, as {@link #memoryStats}. */
    @HostAccess.Export
    public long[] resetPeakMemoryStats(long device) {
        return runtime.resetPeakMemoryStats(device).values();
    }

    // ---- profiler ---------------------------------------------------------------------------------------------

    /** Starts the runtime's {@link DTorch#profiler() profiler}; an {@link IllegalStateException} while one records. */
    @HostAccess.Export
    public void profilerStart() {
        runtime.profiler().start();
    }

    /**
     * Stops the runtime's profiler and returns its trace, an opaque handle (the caller syncs first, so the devices'
     * kernels are in it).
     */
    @HostAccess.Export
    public Trace profilerStop() {
        return runtime.profiler().stop();
    }

    /** {@code trace} as Chrome trace event JSON ({@link Trace#writeChromeJson(java.io.Writer)}). */
    @HostAccess.Export
    public String chromeJson(Trace trace) {
        StringWriter out = new StringWriter();
        try {
            trace.writeChromeJson(out);
        } catch (IOException e) {
            throw new UncheckedIOException(e);  // a StringWriter does not fail
        }
        return out.toString();
    }

    /** {@code trace}'s {@link Trace#keyAverages()}, most time first: one {@code [category, name, calls, totalNanos, bytes]} per row. */
    @HostAccess.Export
    public Object[] keyAverages(Trace trace) {
        return trace.keyAverages().stream()
            .map(r -> new Object[] {r.category(), r.name(), r.calls(), r.totalNanos(), r.bytes()})
            .toArray();
    }

    /** The JVM's monotonic clock, in nanoseconds (for measuring from Python against Java). */
    @HostAccess.Export
    public long nanoTime() {
        return System.nanoTime();
    }

    // ---- conversions ------------------------------------------------------------------------------------------

    private org.dtorch.core.distributed.Sharding sharding(DeviceMesh mesh, Placement[] placements) {
        return new org.dtorch.core.distributed.Sharding(mesh, placements.length == 0
            ? java.util.Collections.nCopies(mesh.ndim(), Placement.replicate()) : List.of(placements));
    }

    /** A Python int as an exact long; one outside int64 is refused (the Python side raises OverflowError first). */
    private static long exactLong(String op, Value v) {
        if (!v.fitsInLong()) {
            throw new ArithmeticException(op + ": the integer " + v + " does not fit in int64");
        }
        return v.asLong();
    }

    /** A Python number as a double; an int beyond 2^53 is rounded to the nearest double, as Python's float() does. */
    private static double asDouble(Value v) {
        return v.fitsInDouble() ? v.asDouble() : v.fitsInLong() ? (double) v.asLong() : v.asDouble();
    }

    /** A float going into an integral dtype: truncated toward zero, as torch does; NaN, infinities and floats beyond int64 are refused. */
    private static long truncated(String op, Value v) {
        double d = asDouble(v);
        if (!(d >= -0x1p63 && d < 0x1p63)) {
            throw new IllegalArgumentException(op + ": the value " + d + " cannot be converted to an integer dtype without overflow");
        }
        return (long) d;
    }

    static DeviceKind kindOf(String deviceType) {
        return switch (deviceType.toLowerCase(Locale.ROOT)) {
            case "cpu" -> DeviceKind.CPU;
            case "cuda", "gpu" -> DeviceKind.CUDA;
            default -> throw new IllegalArgumentException("unknown device type '" + deviceType + "' (expected 'cpu' or 'cuda')");
        };
    }

    /** The libtorch type of a dtype name for a distributed tensor: the {@code torch} module's names, less complex ones. */
    static ScalarType scalarType(String name) {
        ScalarType type = Dtypes.scalarType(name);
        if (type == ScalarType.ComplexFloat || type == ScalarType.ComplexDouble) {
            throw new IllegalArgumentException("dtype '" + name + "' is complex; distributed tensors take real and bool dtypes");
        }
        return type;
    }

    /** Parses {@code "S(0)"}, {@code "R"}, {@code "P(sum)"}. */
    static Placement placement(String text) {
        String s = text.trim();
        if (s.equals("R")) {
            return Placement.replicate();
        }
        if (s.startsWith("S(") && s.endsWith(")")) {
            return Placement.shard(Integer.parseInt(s.substring(2, s.length() - 1).trim()));
        }
        if (s.startsWith("P(") && s.endsWith(")")) {
            return Placement.partial(ReduceOpType.valueOf(s.substring(2, s.length() - 1).trim().toUpperCase(Locale.ROOT)));
        }
        throw new IllegalArgumentException("unknown placement '" + text + "' (expected S(d), R or P(op))");
    }

    private static Placement[] placementArray(Value placements) {
        return strings(placements).stream().map(PyBridge::placement).toArray(Placement[]::new);
    }

    private static long[] longs(Value v) {
        if (v == null || v.isNull()) {
            return new long[0];
        }
        if (v.isNumber()) {
            return new long[] {v.asLong()};
        }
        long[] out = new long[Math.toIntExact(v.getArraySize())];
        for (int i = 0; i < out.length; i++) {
            out[i] = v.getArrayElement(i).asLong();
        }
        return out;
    }

    private static List<String> strings(Value v) {
        List<String> out = new ArrayList<>();
        if (v == null || v.isNull()) {
            return out;
        }
        for (long i = 0; i < v.getArraySize(); i++) {
            out.add(v.getArrayElement(i).asString());
        }
        return out;
    }
}
