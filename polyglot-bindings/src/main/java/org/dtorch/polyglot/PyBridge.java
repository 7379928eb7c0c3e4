package org.dtorch.polyglot;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.api.ChannelEdge;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.Trace;
import org.dtorch.ops.RingAttentionSpec;
import org.dtorch.polyglot.torch.AtenOperator;
import org.dtorch.polyglot.torch.PyTensor;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * The one entry point of the Python package into a {@link DTorch} runtime. It speaks in the types Python
 * has (numbers, strings, lists) and hands out opaque {@link DTensor} and {@link DeviceMesh} handles that the
 * Python classes wrap. Placements travel as their printed form ({@code "S(0)"}, {@code "R"},
 * {@code "P(sum)"}), dtypes as PyTorch names ({@code "float32"}). Polyglot values received as arguments are
 * read during the call and never kept.
 *
 * <p>Its exported methods are the allow-list of what Python may call; their bodies live by concern in package-private
 * classes beside it (meshes, factories, operators, channels, values, diagnostics, and the conversion of arguments).
 *
 * <p>Not thread-safe beyond the runtime's own contract: the Python client thread issues operators;
 * futures may be read from any thread.
 */
public final class PyBridge {
    /** {@link #placementsLabel}'s labels. */
    private static final Map<List<Placement>, String> PLACEMENT_LABELS = new ConcurrentHashMap<>();
    private static final int PLACEMENT_LABELS_KEPT = 1024;

    private final DTorch runtime;
    private final BridgeMeshes meshes;
    private final BridgeFactories factories;
    private final BridgeOperators operators;
    private final BridgeChannels channels;
    private final BridgeValues values;
    private final BridgeDiagnostics diagnostics;
    private final BridgeSafeTensors safetensors;
    private final BridgeAutograd autograd;

    /** A bridge to {@code runtime}, which the caller keeps and closes. */
    public PyBridge(DTorch runtime) {
        this.runtime = Objects.requireNonNull(runtime, "runtime");
        this.meshes = new BridgeMeshes(runtime);
        this.factories = new BridgeFactories(runtime);
        this.operators = new BridgeOperators(runtime);
        this.channels = new BridgeChannels(runtime);
        this.values = new BridgeValues(runtime);
        this.diagnostics = new BridgeDiagnostics(runtime);
        this.safetensors = new BridgeSafeTensors(runtime);
        this.autograd = new BridgeAutograd(runtime);
    }

    /** Refuses what would write a file for the script: the host calls it before an isolated script runs. */
    void isolate() {
        diagnostics.isolate();
        safetensors.isolate();
    }

    /** Stops the threads that run Python callbacks: the host calls it once its context is closed. */
    void stopCallbacks() {
        values.stopCallbacks();
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
     * <p>A CPU mesh on a CUDA runtime is the host memory of its workers, as in Java, where factories and moves to and
     * from the GPUs run.
     *
     * @throws IllegalArgumentException for a CUDA mesh on a CPU runtime (naming the launcher flag that starts one
     *                                  that has it), or ids the runtime cannot map
     */
    @HostAccess.Export
    public DeviceMesh mesh(String deviceType, Value shape, Value ids, Value names) {
        return meshes.mesh(deviceType, shape, ids, names);
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
        return meshes.parallelMesh(deviceType, degrees);
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
        return mesh.subMesh(deviceId, BridgeArguments.strings(names).toArray(String[]::new));
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

    /**
     * What Python reads of a tensor's metadata, in one call: its shape, its mesh, the mesh's device type and the printed
     * placements joined with commas, {@code "S(0),R"} ({@link #shape}, {@link #meshOf}, {@link #meshDeviceType},
     * {@link #placements}).
     */
    @HostAccess.Export
    public Object[] describe(DTensor t) {
        DeviceMesh mesh = t.mesh();
        return new Object[] {t.shape(), mesh, meshDeviceType(mesh), placementsLabel(t.placements())};
    }

    /**
     * Placements printed and joined, {@code "S(0),R"}: every tensor Python reads the metadata of asks, and a program has
     * few distinct placement lists, so each is printed once. Cleared when full.
     */
    private static String placementsLabel(List<Placement> placements) {
        String label = PLACEMENT_LABELS.get(placements);
        if (label == null) {
            StringBuilder joined = new StringBuilder();
            for (Placement p : placements) {
                joined.append(joined.isEmpty() ? "" : ",").append(p);
            }
            label = joined.toString();
            if (PLACEMENT_LABELS.size() >= PLACEMENT_LABELS_KEPT) {
                PLACEMENT_LABELS.clear();
            }
            PLACEMENT_LABELS.put(List.copyOf(placements), label);
        }
        return label;
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
        return factories.factory(kind, shape, dtype, mesh, placements, seed);
    }

    /**
     * {@code full(shape, value)}: {@code valueKind} is the Python type of the value, {@code bool}, {@code int}
     * (an exact 64-bit integer) or {@code float}.
     */
    @HostAccess.Export
    public DTensor full(Value shape, String dtype, DeviceMesh mesh, Value placements, Value value, String valueKind) {
        return factories.full(shape, dtype, mesh, placements, value, valueKind);
    }

    /** {@code arange(start, end, step)}: in exact 64-bit integers when {@code integral}, else in double precision. */
    @HostAccess.Export
    public DTensor arange(Value start, Value end, Value step, boolean integral, String dtype, DeviceMesh mesh, Value placements) {
        return factories.arange(start, end, step, integral, dtype, mesh, placements);
    }

    /**
     * A tensor from flat row-major values and a shape (Python flattens nested lists first). Integers stay exact
     * into integral dtypes; a float going into one is truncated toward zero, as in torch; a value the dtype cannot
     * hold is refused, as torch refuses it.
     */
    @HostAccess.Export
    public DTensor fromValues(Value flatValues, Value shape, String dtype, DeviceMesh mesh, Value placements) {
        return factories.fromValues(flatValues, shape, dtype, mesh, placements);
    }

    /**
     * A distributed tensor from a {@code torch.Tensor} Python holds (made with {@code torch}, or a value that came back):
     * each device copies its shard of it; a CUDA tensor is read through the host first.
     */
    @HostAccess.Export
    public DTensor fromTorch(PyTensor value, DeviceMesh mesh, Value placements) {
        return factories.fromTorch(value, mesh, placements);
    }

    // ---- operators ------------------------------------------------------------------------------------------

    /** {@code add}, {@code sub}, {@code mul}, {@code div} of two tensors. */
    @HostAccess.Export
    public DTensor binary(String op, DTensor a, DTensor b) {
        return operators.binary(op, a, b);
    }

    /**
     * A tensor and a Python number: {@code add}, {@code sub}, {@code mul}, {@code div}, {@code rsub}, {@code rdiv}.
     * {@code valueKind} is the number's Python type, {@code bool}, {@code int} (kept as an exact 64-bit integer)
     * or {@code float}: it decides torch's type promotion.
     */
    @HostAccess.Export
    public DTensor scalar(String op, DTensor t, Value value, String valueKind) {
        return operators.scalar(op, t, value, valueKind);
    }

    /** {@code neg}, {@code relu}, {@code silu}, {@code gelu}, {@code exp}, {@code tanh}, {@code sigmoid}. */
    @HostAccess.Export
    public DTensor unary(String op, DTensor t) {
        return operators.unary(op, t);
    }

    /** {@code sum}, {@code mean}, {@code max} over {@code dims} (all if empty or None). */
    @HostAccess.Export
    public DTensor reduce(String kind, DTensor t, Value dims, boolean keepdim) {
        return operators.reduce(kind, t, dims, keepdim);
    }

    /** {@code to(dtype)}. */
    @HostAccess.Export
    public DTensor to(DTensor t, String dtype) {
        return t.to(BridgeArguments.scalarType(dtype));
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
        return operators.aten(name, key, values);
    }

    /**
     * {@link #aten}'s overload for {@code name} and {@code key}, bound once: Python keeps it per name and key and calls
     * it with the values as arguments ({@link DistributedCall}), so that a repeated call skips the lookup and resolution.
     *
     * @throws IllegalArgumentException when libtorch has no operator of that name
     */
    @HostAccess.Export
    public DistributedCall atenCall(String name, String key) {
        return operators.bind(name, key);
    }

    /** The move to {@code placements} on {@code mesh}. */
    @HostAccess.Export
    public DTensor redistribute(DTensor t, DeviceMesh mesh, Value placements) {
        return t.redistribute(mesh, BridgeArguments.placementArray(placements));
    }

    /**
     * Ring attention of {@code q} against {@code k}, {@code v} and {@code mask} (or null) moved to the placements it needs
     * ({@link RingAttentionSpec#attend}); {@code scale} NaN for the default.
     */
    @HostAccess.Export
    public DTensor ringAttention(DTensor q, DTensor k, DTensor v, DTensor mask, boolean causal, double scale, boolean enableGqa) {
        return RingAttentionSpec.attend(q, k, v, mask, causal, scale, enableGqa);
    }

    /** Refuses, before anything moves, what ring attention could not take with {@code placements} on {@code mesh}. */
    @HostAccess.Export
    public void checkRingAttention(DTensor q, DTensor k, DTensor v, DTensor mask, boolean causal, double scale, boolean enableGqa,
                                   DeviceMesh mesh, Value placements) {
        BridgeOperators.checkRingAttention(new RingAttentionSpec(causal, scale, enableGqa), q, k, v, mask, mesh, placements);
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
     * {@code t[index] = value} in place, for a basic index: {@code items} holds the index items, separated by {@code ;},
     * each {@code a<i>}, {@code s<start>,<stop>,<step>} (an empty bound for None), {@code n} (None) or {@code e}
     * (Ellipsis); {@code value} is a {@link DTensor} or a number of {@code valueKind} ({@code bool}, {@code int}, {@code float}).
     */
    @HostAccess.Export
    public void setItem(DTensor t, String items, Value value, String valueKind) {
        operators.setItem(t, items, value, valueKind);
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
        return factories.fromLocal(tensors, mesh, placements, shape, runCheck);
    }

    /** {@code Tensor.to_local}: every device's local tensor, in the mesh's device order ({@link DTensor#toLocal()}). */
    @HostAccess.Export
    public PyTensor[] toLocal(DTensor t) {
        return BridgeFactories.toLocal(t);
    }

    // ---- pipeline edges -----------------------------------------------------------------------------------------

    /** Declares the edge from {@code src} to {@code dst} ({@link DTorch#channel}); {@code timeoutSeconds} 0 means the runtime's. */
    @HostAccess.Export
    public ChannelEdge channel(DeviceMesh src, DeviceMesh dst, double timeoutSeconds) {
        return channels.declare(src, dst, timeoutSeconds);
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
        return values.getTensorAsync(t);
    }

    /** Blocks until every device ran everything queued so far. */
    @HostAccess.Export
    public void sync() {
        values.sync();
    }

    /** Writes the operators issued since the runtime started or the last dump as Graphviz DOT ({@link DTorch#dumpGraph}). */
    @HostAccess.Export
    public void dumpGraph(String path) {
        diagnostics.dumpGraph(path);
    }

    /**
     * The runtime's collective calls of {@code kind} so far ({@code ALL_GATHER}, {@code POINT_TO_POINT}, ...: a
     * {@link CollectiveKind}), one per device and call, for tests that assert what an operation communicated. In
     * per-device-process mode the groups live in the workers and the count stays 0.
     */
    @HostAccess.Export
    public long collectiveCount(String kind) {
        return diagnostics.collectiveCount(kind);
    }

    // ---- memory statistics ------------------------------------------------------------------------------------

    /** The names of {@link #memoryStats}'s values, in their order ({@link MemoryStats#KEYS}). */
    @HostAccess.Export
    public String[] memoryStatKeys() {
        return BridgeDiagnostics.memoryStatKeys();
    }

    /** Device {@code device}'s {@link MemoryStats} once it ran everything issued so far, in the order of {@link #memoryStatKeys}. */
    @HostAccess.Export
    public long[] memoryStats(long device) {
        return diagnostics.memoryStats(device);
    }

    /** Restarts device {@code device}'s peaks from the live values; its statistics after that, as {@link #memoryStats}. */
    @HostAccess.Export
    public long[] resetPeakMemoryStats(long device) {
        return diagnostics.resetPeakMemoryStats(device);
    }

    // ---- safetensors ------------------------------------------------------------------------------------------

    /** The tensors of safetensors files or an index: rows {@code [name, dtype, shape, file, begin, end]}, then metadata pairs. */
    @HostAccess.Export
    public Object[] safetensorsHeader(Value paths) {
        return safetensors.header(paths);
    }

    /**
     * {@code dtorch.load_state_dict}: the named tensors with their {@code [mesh, placements, shape or None]} layouts, each
     * device reading its own shard ({@link org.dtorch.api.SafeTensors}); returns names, tensors, missing and unexpected names.
     */
    @HostAccess.Export
    public Object[] loadStateDict(Value paths, Value names, Value layouts, Value expected, boolean strict) {
        return safetensors.load(paths, names, layouts, expected, strict);
    }

    /** {@code dtorch.save_state_dict}: each device writes its shard; sharded files and an index when {@code maxFileBytes > 0}. */
    @HostAccess.Export
    public String saveStateDict(String path, Value names, Value tensors, Value metadata, long maxFileBytes) {
        return safetensors.save(path, names, tensors, metadata, maxFileBytes);
    }

    /** Every tensor of safetensors files as plain torch tensors: names, then tensors. */
    @HostAccess.Export
    public Object[] loadSafetensorsFile(Value paths) {
        return safetensors.loadFile(paths);
    }

    /** Plain torch tensors to a safetensors file. */
    @HostAccess.Export
    public void saveSafetensorsFile(String path, Value names, Value tensors, Value metadata) {
        safetensors.saveFile(path, names, tensors, metadata);
    }

    // ---- line charts ------------------------------------------------------------------------------------------

    /** {@code dtorch.plot.line_chart}: series {@code [name, xs, ys]} drawn to a PNG file ({@link LineChartFile}). */
    @HostAccess.Export
    public void writeLineChart(String path, String title, String xTitle, String yTitle, Value series, boolean logY) {
        diagnostics.writeLineChart(path, title, xTitle, yTitle, series, logY);
    }

    // ---- profiler ---------------------------------------------------------------------------------------------

    /** Starts the runtime's {@link DTorch#profiler() profiler}; an {@link IllegalStateException} while one records. */
    @HostAccess.Export
    public void profilerStart() {
        diagnostics.profilerStart();
    }

    /**
     * Stops the runtime's profiler and returns its trace, an opaque handle (the caller syncs first, so the devices'
     * kernels are in it).
     */
    @HostAccess.Export
    public Trace profilerStop() {
        return diagnostics.profilerStop();
    }

    /** {@code trace} as Chrome trace event JSON ({@link Trace#writeChromeJson(java.io.Writer)}). */
    @HostAccess.Export
    public String chromeJson(Trace trace) {
        return BridgeDiagnostics.chromeJson(trace);
    }

    /** {@code trace}'s {@link Trace#keyAverages()}, most time first: one {@code [category, name, calls, totalNanos, bytes]} per row. */
    @HostAccess.Export
    public Object[] keyAverages(Trace trace) {
        return BridgeDiagnostics.keyAverages(trace);
    }

    /** Autograd of distributed tensors ({@link BridgeAutograd}). */
    @HostAccess.Export
    public BridgeAutograd autograd() {
        return autograd;
    }

    /** The JVM's monotonic clock, in nanoseconds (for measuring from Python against Java). */
    @HostAccess.Export
    public long nanoTime() {
        return System.nanoTime();
    }
}
