package org.dtorch.polyglot.torch;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;
import org.dtorch.core.tensor.NativeMemoryBudget;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * What Python's {@code torch} package talks to (the polyglot binding {@value #BINDING}): libtorch's operators by name,
 * read from the ATen dispatcher, and the few things that are not operators (tensors from Python values, the random seed,
 * CUDA's presence).
 *
 * <p>{@link #op(String)} finds every overload of {@code aten::<name>} the first time a name is asked for: the
 * dispatcher's list of operator names is read once (about 3,500 overloads of 1,900 names), and each
 * {@link AtenOperator} reads its schemas when first used. No operator is written by hand.
 *
 * <p>One instance per JVM ({@link #shared()}), shared by every Python context. Thread-safe: the name index is built
 * once under a lock and the operators are cached in a concurrent map.
 */
public final class TorchModule {
    /** The polyglot binding under which the Python {@code torch} package finds this module. */
    public static final String BINDING = "dtorch.torch";

    private static final TorchModule SHARED = new TorchModule();

    private final ConcurrentHashMap<String, AtenOperator> operators = new ConcurrentHashMap<>();

    private TorchModule() {
    }

    /** The module of this JVM. */
    public static TorchModule shared() {
        return SHARED;
    }

    /** The operator {@code aten::<name>}, or null when there is none (Python raises {@code AttributeError}). */
    @HostAccess.Export
    public AtenOperator op(String name) {
        AtenOperator op = operators.get(name);
        if (op != null) {
            return op;
        }
        List<Overload> overloads = AtenOps.overloads(name);
        if (overloads == null) {
            return null;
        }
        return operators.computeIfAbsent(name, n -> new AtenOperator(n, overloads));
    }

    /** True when {@code aten::<name>} exists. */
    @HostAccess.Export
    public boolean hasOp(String name) {
        return AtenOps.exists(name);
    }

    /**
     * A tensor from flat row-major Python values: exact 64-bit integers into integral dtypes ({@code integral}),
     * doubles otherwise, converted to {@code dtype} and moved to {@code device} ({@code cpu}, {@code cuda},
     * {@code cuda:1}).
     */
    @HostAccess.Export
    public PyTensor fromValues(Value flat, Value shape, boolean integral, String dtype, String device) {
        int n = Math.toIntExact(flat.getArraySize());
        long[] dims = new long[Math.toIntExact(shape.getArraySize())];
        for (int i = 0; i < dims.length; i++) {
            dims[i] = shape.getArrayElement(i).asLong();
        }
        Pointer data;
        ScalarType source;
        if (integral) {
            long[] values = new long[n];
            for (int i = 0; i < n; i++) {
                Value v = flat.getArrayElement(i);
                values[i] = v.isBoolean() ? (v.asBoolean() ? 1 : 0) : v.asLong();
            }
            data = new LongPointer(values);
            source = ScalarType.Long;
        } else {
            double[] values = new double[n];
            for (int i = 0; i < n; i++) {
                Value v = flat.getArrayElement(i);
                values[i] = v.isBoolean() ? (v.asBoolean() ? 1 : 0) : v.fitsInDouble() ? v.asDouble() : (double) v.asLong();
            }
            data = new DoublePointer(values);
            source = ScalarType.Double;
        }
        ScalarType target = Dtypes.scalarType(dtype);
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(source));
             Tensor view = torch.from_blob(data, dims, options); Tensor converted = view.to(target)) {
            if (device.equals("cpu")) {
                return PyTensor.wrap(converted.clone());
            }
            requireCuda(device);
            try (Device d = new Device(device)) {
                return PyTensor.wrap(converted.to(d, target, false, true, new org.bytedeco.pytorch.MemoryFormatOptional()));
            }
        }
    }

    /** libtorch's autograd: tensors' gradients, backward passes, and the calling thread's grad mode. */
    @HostAccess.Export
    public Autograd autograd() {
        return Autograd.shared();
    }

    /** Seeds libtorch's default generators (CPU, and CUDA where present). */
    @HostAccess.Export
    public void manualSeed(long seed) {
        AtenOps.exists("add"); // loads the natives first (Cuda.loadNatives)
        torch.manual_seed(seed);
    }

    /** True when CUDA tensors can be made in this process (the GPU build on a machine with a GPU). */
    @HostAccess.Export
    public boolean cudaAvailable() {
        return Cuda.isAvailable();
    }

    /** The number of CUDA devices this process sees. */
    @HostAccess.Export
    public int cudaDeviceCount() {
        return Cuda.deviceCount();
    }

    /**
     * Checks that {@code device} can be used before libtorch is asked to: a CUDA device where CUDA is missing fails with
     * the reason and the fix.
     */
    @HostAccess.Export
    public void requireDevice(String device) {
        if (!device.startsWith("cpu")) {
            requireCuda(device);
        }
    }

    private static void requireCuda(String device) {
        int colon = device.indexOf(':');
        int index = colon < 0 ? 0 : Integer.parseInt(device.substring(colon + 1));
        Cuda.require(org.dtorch.core.device.Device.cuda(index));
    }

    /**
     * JavaCPP objects of this JVM whose native memory is not released yet (every libtorch handle counts one): what a
     * lifetime test watches, since a process's resident size also holds the Java heap's growth.
     */
    @HostAccess.Export
    public long liveNativeHandles() {
        return org.bytedeco.javacpp.Pointer.totalCount();
    }

    /**
     * Native bytes charged by dropped-but-not-collected handles of this JVM: the native-memory budgets (the host's and
     * the GPUs') that trigger a collection, since the Java heap alone never asks for one.
     */
    @HostAccess.Export
    public long chargedBytes() {
        return NativeMemoryBudget.global().outstandingBytes() + NativeMemoryBudget.of(DeviceKind.CUDA).outstandingBytes();
    }
}
